"""The reading sheet as one self-contained HTML page (``trie-mine-review -o sheet.html``).

The page is the package's files ``review_sheet.html`` (the layout), ``review_sheet.css`` and
``review_sheet.js`` (no framework) with the sheet's data put in: nothing is fetched (no server,
no network, no external font: the Chinese side asks for a named CJK font stack with fallbacks),
and its Content-Security-Policy allows only its own script and style (their SHA-256 digests),
so no other script could run even if markup reached the page.

**Corpus text is data.** The sheet (:func:`page_data`) travels as JSON inside ``<script
type="application/json">`` with ``<``, ``>``, ``&``, U+2028 and U+2029 written as ``\\uXXXX``
escapes (:func:`embedded_json`: a ``</script>`` in a sentence cannot close the element), and
the page puts every text on the screen with ``textContent``, never as markup.  The page keeps
its answers in the browser's ``localStorage`` under ``trie-mine-review:FINGERPRINT`` and exports
them (a button and the key ``e``) as ``answers.tsv``
(:mod:`triemine.evaluation.review_answers`).
"""
from __future__ import annotations

import base64
import hashlib
import html
import json
import re
from pathlib import Path
from typing import Dict, Optional

from triemine.evaluation.review import BELOW, N, SEED, Sheet, draw, read_run
from triemine.evaluation.review_answers import header
from triemine.io import write_text

HERE = Path(__file__).parent
LAYOUT, STYLE, SCRIPT = "review_sheet.html", "review_sheet.css", "review_sheet.js"
STORAGE_PREFIX = "trie-mine-review:"
_ESCAPES = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028",
            "\u2029": "\\u2029"}


def embedded_json(obj) -> str:
    """``obj`` as JSON that is safe inside an HTML ``<script>`` element: the characters of
    ``_ESCAPES`` as JSON escapes (the same value once parsed); other text as it is (UTF-8)."""
    text = json.dumps(obj, ensure_ascii=False, sort_keys=True, allow_nan=False)
    return re.sub("[<>&\u2028\u2029]", lambda m: _ESCAPES[m.group(0)], text)


def page_data(sheet: Sheet) -> Dict[str, object]:
    """What the page's script reads: the sheet's pairs (shuffled order), strata, parameters,
    fingerprint, the answers file's header and the storage key."""
    return {"run": sheet.run, "kind": sheet.kind, "fingerprint": sheet.fingerprint,
            "params": sheet.params(), "kept": sheet.kept,
            "expected_precision": sheet.expected_precision, "strata": sheet.strata,
            "pairs": sheet.pairs, "answers_header": header(sheet),
            "storage_key": STORAGE_PREFIX + sheet.fingerprint}


def _digest(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode() \
        + "'"


def sheet_html(sheet: Sheet) -> str:
    """The page of ``sheet`` (module docstring)."""
    style = (HERE / STYLE).read_text(encoding="utf-8")
    script = (HERE / SCRIPT).read_text(encoding="utf-8")
    csp = (f"default-src 'none'; script-src {_digest(script)}; style-src {_digest(style)}; "
           "img-src data:; base-uri 'none'; form-action 'none'")
    fill = {"CSP": csp, "TITLE": html.escape(f"trie-mine review · {sheet.run}"),
            "STYLE": style, "SCRIPT": script, "DATA": embedded_json(page_data(sheet))}
    layout = (HERE / LAYOUT).read_text(encoding="utf-8")
    return re.sub(r"\{\{([A-Z]+)\}\}", lambda m: fill[m.group(1)], layout)


def write_sheet(sheet: Sheet, path) -> None:
    """The page of ``sheet`` written to ``path`` atomically."""
    write_text(path, sheet_html(sheet), "review sheet", hint="")


def review_sheet(run_path, output, n: Optional[int] = None, seed: Optional[int] = None,
                 below: Optional[int] = None) -> Dict[str, object]:
    """``trie-mine-review RUN -o SHEET``: the run read (:func:`~triemine.evaluation.review.
    read_run`), its sheet drawn (None: the defaults :data:`~triemine.evaluation.review.N`,
    ``SEED``, ``BELOW``) and written to ``output``; returns ``{"output", "fingerprint",
    "pairs", "kept", "n", "seed", "below", "strata"}``."""
    sheet = draw(read_run(run_path), N if n is None else n, SEED if seed is None else seed,
                 BELOW if below is None else below)
    write_sheet(sheet, output)
    return {"output": str(output), "fingerprint": sheet.fingerprint, "pairs": len(sheet.pairs),
            "kept": sheet.kept, **sheet.params(), "strata": sheet.strata}
