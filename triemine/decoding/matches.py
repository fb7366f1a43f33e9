"""What the trie search finds: :class:`Match`, one finished hypothesis of one source, and its
scores.

Scores (natural log): ``score`` is the total log-probability of the target tokens given the source,
EOS included; ``ce_token = -score / n_tokens`` (target tokens incl. EOS); ``ce_word = -score /
(words + 1)`` where ``words`` is the number of whitespace-separated words of the detokenised
target (:func:`word_count`) and the 1 stands for EOS.  :func:`rank_key` is the search's ranking
of finished hypotheses.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, List, Optional, Sequence, Tuple

import numpy as np

from triemine.io import format_rows


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


# The scores derived from a forced or searched score: the one home of their formulas, for one
# match (Python floats) and for a column of candidates (numpy arrays) alike.

def ce_token(score, n_tokens):
    """The per-token cross-entropy ``-score / n_tokens`` (target tokens incl. EOS)."""
    return -score / n_tokens


def ce_word(score, n_words):
    """The per-word cross-entropy ``-score / (n_words + 1)`` (the 1 stands for EOS)."""
    return -score / (n_words + 1)


def pmi(score, prior, n_tokens):
    """``(score - prior) / n_tokens``: log P(y|x) - log P(y|empty source), per token."""
    return (score - prior) / n_tokens


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
                         score=score, n_tokens=n_tok, ce_token=ce_token(score, n_tok),
                         ce_word=ce_word(score, word_count(text)), text=text,
                         prior=h.get("prior")))
    return out


def match_rows(matches: Iterable[Match], columns: Sequence[str], src_ids: Sequence[str],
               src_texts: Sequence[str], tgt_ids: Sequence[str], tgt_texts: Sequence[str],
               skip_tgt: Optional[np.ndarray] = None, first_source: int = 0) -> str:
    """Mining-TSV rows of ``columns`` (:attr:`SearchSettings.columns
    <triemine.decoding.settings.SearchSettings.columns>`), one per (match, target line id),
    written by :func:`triemine.io.tsv.format_rows`: ``prior`` is log P(target | empty source),
    ``pmi`` ``(score - prior) / n_tokens``, ``src_line`` and ``tgt_line`` the 1-based corpus
    lines (``first_source``: the corpus line of ``src_ids[0]``, 0-based); ``skip_tgt``: a mask
    of target lines too long to keep (:func:`triemine.decoding.runner.long_targets`)."""
    kept = [(m, line) for m in matches for line in m.tgt_line_ids
            if skip_tgt is None or not skip_tgt[line]]
    cell = {"src_id": lambda m, line: src_ids[m.src_index],
            "tgt_id": lambda m, line: tgt_ids[line],
            "score": lambda m, line: m.score, "ce_word": lambda m, line: m.ce_word,
            "ce_token": lambda m, line: m.ce_token, "n_tokens": lambda m, line: m.n_tokens,
            "src": lambda m, line: src_texts[m.src_index],
            "tgt": lambda m, line: tgt_texts[line], "prior": lambda m, line: m.prior,
            "pmi": lambda m, line: pmi(m.score, m.prior, m.n_tokens),
            "src_line": lambda m, line: first_source + m.src_index + 1,
            "tgt_line": lambda m, line: line + 1}
    return format_rows(columns, {c: [cell[c](m, line) for m, line in kept] for c in columns})


def rank_key(total_score: float, n_tokens: int, tokens, prior: Optional[float] = None,
             prior_weight: float = 0.0, len_penalty: float = 1.0):
    """Sort key (ascending = best first) of a finished hypothesis: the search's own ranking,
    ``(log P(y|x) - prior_weight * prior) / n_tokens ** len_penalty``, ties broken by the tokens.
    The one home of that rule: the generator and the merge of target shards both call it."""
    corrected = total_score - prior_weight * (prior if prior is not None else 0.0)
    return (-corrected / n_tokens ** len_penalty, list(tokens))
