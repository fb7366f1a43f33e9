"""The reading sheet in a real browser: Debian's headless Chromium (scripts/browser_setup.sh,
which ``make test`` runs first) opens a sheet written by trie-mine-review, real key events
(DevTools ``Input.dispatchKeyEvent``) answer its pairs, go back and forward, reload it (the
answers stay) and export answers.tsv (the download the key ``e`` starts), which
``--labels`` then counts.

The run holds a source ``</script><img src=x onerror="document.title='pwned'">`` and other
markup: it must show as text and run nothing. Tier ``cluster``: it starts a process (the
browser), which tests/tiers.py refuses to the other tiers. A missing browser or CJK font is a
failure, not a skip."""
import json
import os
import shutil
import subprocess
import time

import pytest

from cdp import Chromium
from review_runs import INJECTED, TEXTS, mining_run
from triemine.cli import review_main
from triemine.evaluation.bucc import read_gold
from triemine.evaluation.review import draw, read_run

pytestmark = pytest.mark.cluster
SETUP = "run scripts/browser_setup.sh (make test runs it first)"
RELOAD_S = 10  # how long the answers may take to come back on reloads of the sheet


def _need_browser() -> None:
    if shutil.which("chromium") is None:
        pytest.fail(f"no chromium on the PATH: {SETUP}")
    if shutil.which("fc-list") is None:
        pytest.fail(f"no fc-list (fontconfig) to find a CJK font: {SETUP}")
    fonts = subprocess.run(["fc-list", ":lang=zh"], capture_output=True, text=True).stdout
    if not fonts.strip():
        pytest.fail(f"no CJK font (fc-list :lang=zh lists none): {SETUP}")


def _shown(page) -> list:
    return page.evaluate("[document.getElementById('src').textContent, "
                         "document.getElementById('tgt').textContent, "
                         "document.getElementById('counter').textContent]")


def _fonts_of(page, selector: str) -> dict:
    """The fonts the browser drew ``selector``'s text with: family -> glyphs drawn."""
    root = page.call("DOM.getDocument")["root"]["nodeId"]
    node = page.call("DOM.querySelector", nodeId=root, selector=selector)["nodeId"]
    fonts = page.call("CSS.getPlatformFontsForNode", nodeId=node)["fonts"]
    return {f["familyName"]: f["glyphCount"] for f in fonts}


def _wait_file(path, timeout: float = 20) -> str:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if os.path.isfile(path) and not os.path.exists(path + ".crdownload"):
            with open(path, encoding="utf-8") as f:
                return f.read()
        time.sleep(0.1)
    raise AssertionError(f"no download {path} in {timeout} s")


def test_a_reader_answers_the_sheet_in_chromium(tmp_path, capsys):
    _need_browser()
    run = mining_run(tmp_path / "run.tsv")
    sheet_path = tmp_path / "sheet.html"
    assert review_main([run, "-o", str(sheet_path), "--n", "100", "--below", "4"]) == 0
    sheet = draw(read_run(run), n=100, seed=0, below=4)
    assert json.loads(capsys.readouterr().out)["fingerprint"] == sheet.fingerprint
    pairs = sheet.pairs
    assert sum(p["src"] == INJECTED for p in pairs) >= 1  # every kept pair is on this sheet
    assert any(p["src"] == TEXTS[3][0] for p in pairs)    # and the Chinese ones
    downloads = tmp_path / "downloads"
    downloads.mkdir()
    # the answer pressed at each pair in turn; ArrowRight passes a pair unanswered
    plan = ["y", "n", "p", "s", "ArrowRight", "y"]
    with Chromium(str(tmp_path)) as browser:
        page = browser.page
        page.call("Page.enable")
        page.call("Runtime.enable")
        page.call("DOM.enable")
        page.call("CSS.enable")
        browser.root.call("Browser.setDownloadBehavior", behavior="allow",
                          downloadPath=str(downloads), eventsEnabled=True)
        page.load(sheet_path.as_uri())
        title = page.evaluate("document.title")
        assert title == "trie-mine review · run.tsv"
        expected = {}
        for i, pair in enumerate(pairs):
            src, tgt, counter = _shown(page)
            assert (src, tgt) == (pair["src"], pair["tgt"])  # as text, unchanged
            assert counter == f"pair {i + 1} of {len(pairs)}"
            if src == TEXTS[3][0]:  # Chinese: every glyph drawn by a CJK font of the stack
                fonts = _fonts_of(page, "#src")
                assert sum(n for f, n in fonts.items() if "CJK" in f) == len(src), fonts
            key = plan[i % len(plan)]
            page.press(key)
            if key != "ArrowRight":
                expected[pair["src_id"], pair["tgt_id"]] = key
        assert _shown(page)[2] == f"pair {len(pairs)} of {len(pairs)}"  # the last one stays
        # back twice (Backspace, then the arrow), change that answer, forward again
        page.press("Backspace")
        page.press("ArrowLeft")
        changed = pairs[len(pairs) - 3]
        assert _shown(page)[:2] == [changed["src"], changed["tgt"]]
        page.press("n")
        expected[changed["src_id"], changed["tgt_id"]] = "n"
        assert _shown(page)[2] == f"pair {len(pairs) - 1} of {len(pairs)}"
        page.press("ArrowRight")
        assert _shown(page)[2] == f"pair {len(pairs)} of {len(pairs)}"
        # the markup of the corpus ran nothing and made no element
        assert page.evaluate("document.title") == title
        assert page.evaluate("document.querySelectorAll('img').length") == 0
        assert page.evaluate("document.scripts.length") == 2
        assert not [e for e in page.events if e["method"] == "Page.javascriptDialogOpening"]
        # the answers survive a reload (localStorage under the fingerprint). Chromium has read
        # an empty entry on a reload milliseconds after the last answer (once, in CI): the
        # page is reloaded until they are back, for at most RELOAD_S seconds
        exported = page.evaluate("window.trieReview.answersTsv()")
        end = time.monotonic() + RELOAD_S
        while True:
            page.load()
            restored = page.evaluate("window.trieReview.answersTsv()")
            if restored == exported or time.monotonic() > end:
                break
            time.sleep(0.5)
        assert restored == exported
        assert page.evaluate(f"localStorage.getItem('trie-mine-review:{sheet.fingerprint}')")
        # e downloads answers.tsv: the same text as the function the button calls
        page.press("e")
        downloaded = _wait_file(str(downloads / "answers.tsv"))
        assert downloaded == exported
        shot = page.call("Page.captureScreenshot", format="png")["data"]
        assert len(shot) > 1000
    rows = [line.split("\t") for line in downloaded.splitlines()[2:]]
    assert {(s, t): a for s, t, a in rows} == expected
    gold = tmp_path / "gold.tsv"
    assert review_main([run, "--labels", str(downloads / "answers.tsv"),
                        "--gold-out", str(gold)]) == 0
    out = json.loads(capsys.readouterr().out)
    kept_keys = {(p["src_id"], p["tgt_id"]) for p in pairs if p["stratum"] != "below"}
    for answer in "ynps":
        assert out[answer] == sum(a == answer for k, a in expected.items() if k in kept_keys)
    assert out["below"]["y"] == sum(a == "y" for k, a in expected.items()
                                    if k not in kept_keys)
    assert set(read_gold(gold)) == {k for k, a in expected.items() if a == "y"}
