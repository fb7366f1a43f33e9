"""What the trie search finds: :class:`Match`, one finished hypothesis of one source, and its
scores.

Scores (natural log): ``score`` is the total log-probability of the target tokens given the source,
EOS included; ``ce_token = -score / n_tokens`` (target tokens incl. EOS); ``ce_word = -score /
(words + 1)`` where ``words`` is the number of whitespace-separated words of the detokenised
target (:func:`word_count`) and the 1 stands for EOS.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, List, Optional, Sequence, Tuple

import numpy as np

from triemine.tsv import clean_cell, format_number as num

# the columns a search with node priors adds after the mining TSV's required ones
PRIOR_COLUMNS = ("prior", "pmi")


@dataclass(frozen=True)
class Match:
    """One finished hypothesis of one source: a target sentence found in the trie."""

    src_index: int                 # 0-based position in the sources
    rank: int                      # 0 = best (by score / n_tokens)
    tgt_line_ids: Tuple[int, ...]  # 0-based target line indices (several for duplicated lines)
    tokens: Tuple[int, ...]        # target dictionary ids, EOS included
    score: float                   # total log-prob (natural log), EOS included
    n_tokens: int                  # target tokens incl. EOS
    ce_token: float                # -score / n_tokens
    ce_word: float                 # -score / (words of detokenised target + 1)
    text: str                      # detokenised target
    prior: Optional[float] = None  # log P(target | empty source), when the search has node priors


def word_count(text: str) -> int:
    return len(text.split())


def to_matches(model, src_index: int, hyps, nbest: Optional[int]) -> List[Match]:
    """The generator's finished hypotheses of one source as matches (the ``nbest`` best)."""
    out = []
    for rank, h in enumerate(hyps[: nbest] if nbest else hyps):
        toks = tuple(int(t) for t in h["tokens"].tolist())
        text = model.decode_target(toks)
        score = float(h["total_score"])
        n_tok = int(h["n_tokens"])
        out.append(Match(src_index=src_index, rank=rank,
                         tgt_line_ids=tuple(int(x) for x in h["line_ids"]), tokens=toks,
                         score=score, n_tokens=n_tok, ce_token=-score / n_tok,
                         ce_word=-score / (word_count(text) + 1), text=text,
                         prior=h.get("prior")))
    return out


def format_rows(matches: Iterable[Match], src_ids: Sequence[str], src_texts: Sequence[str],
                tgt_ids: Sequence[str], tgt_texts: Sequence[str], with_prior: bool = False,
                skip_tgt: Optional[np.ndarray] = None) -> str:
    """Mining-TSV rows (:mod:`triemine.tsv`), one per (match, target line id); with
    ``with_prior`` also ``prior`` (log P(target | empty source)) and ``pmi`` (per token);
    ``skip_tgt``: a mask of target lines too long to keep
    (:func:`triemine.decoding.runner.long_targets`)."""
    rows = []
    for m in matches:
        extra = ""
        if with_prior:
            extra = f"\t{num(m.prior)}\t{num((m.score - m.prior) / m.n_tokens)}"
        for line in m.tgt_line_ids:
            if skip_tgt is not None and skip_tgt[line]:
                continue
            rows.append(f"{src_ids[m.src_index]}\t{tgt_ids[line]}\t{num(m.score)}\t{num(m.ce_word)}"
                        f"\t{num(m.ce_token)}\t{clean_cell(src_texts[m.src_index])}"
                        f"\t{clean_cell(tgt_texts[line])}{extra}\n")
    return "".join(rows)
