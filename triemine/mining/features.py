"""Exact MT scores and the features derived from them, for every candidate pair.

* :func:`exact_scores`: ``score`` (log P(y|x), EOS included) and ``n_tokens`` by teacher forcing
  for the candidates that lack them (those from the trie search already have them);
* :func:`target_priors`: log P(y | empty source) of the targets, from the trie's node priors when
  they exist, else by teacher forcing, cached per (target corpus, model);
* :func:`derived`: ``ce_word`` and ``ce_token`` (the paper's cross-entropies), ``pmi``, the
  per-token pointwise mutual information ``(score - prior) / n_tokens``, and with a reverse model
  ``dual_ce`` = ``|H(y|x) - H(x|y)| + (H(y|x) + H(x|y)) / 2`` over per-token cross-entropies
  (dual conditional cross-entropy, Junczys-Dowmunt 2018); and ``numerals``
  (:func:`numeral_agreement`), which needs only the texts.

Work is done in chunks that are saved as they finish (``work_dir``), so an interrupted run
resumes without recomputing or losing scores.
"""
from __future__ import annotations

import difflib
import hashlib
import logging
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, Iterable, Optional, Sequence, Set, Tuple

import numpy as np

from triemine.io import cached_npy, load_npy, npy_writer, write_npy
from triemine.decoding.matches import ce_token, ce_word, pmi, word_count
from triemine.judging.numbers import decades
from triemine.mining.candidates import CandidateSet
from triemine.scoring import forced_scoring
from triemine.scoring.rows import JUDGE_ROWS

# pairs per forced-decoding chunk (the cache, progress and shard unit: a scoring shard of
# triemine.mining.score_shards is whole chunks, so both runs compute the same bits): SCORE_CHUNK,
# but a quarter of a smaller job, never under MIN_SCORE_CHUNK (score_chunk), so that a job of a
# thousand pairs is shards for several workers rather than one.  Not smaller: a chunk is also
# the window its pairs are length-sorted in (see docs/decisions.md#scoring-chunk-size)
SCORE_CHUNK = 2000
MIN_SCORE_CHUNK = 256
SCORE_SHARDS = 4


def score_chunk(n_pairs: int) -> int:
    """Pairs per chunk for a job of ``n_pairs`` (see ``SCORE_CHUNK``)."""
    return min(SCORE_CHUNK, max(MIN_SCORE_CHUNK, -(-int(n_pairs) // SCORE_SHARDS)))

logger = logging.getLogger(__name__)


def _encoded(encode, texts: Sequence[str], idx: np.ndarray):
    """``(encoded, local)``: ``encode(text)`` of each distinct line of ``idx``, in line order,
    and every entry of ``idx`` as its position there.  The work and the memory are the
    pairs', not the corpus's (a list of one slot a line was 800 MB a side at 10^8 lines, in
    every scoring shard); the positions keep the lines' order, so the scorer groups and sorts
    the pairs as it did with the lines themselves (the same bits)."""
    lines = np.unique(idx)
    return [encode(texts[i]) for i in lines.tolist()], np.searchsorted(lines, idx)


def _chunked(work_dir: Optional[Path], name: str, n: int, chunk: int, compute):
    """``compute(start, end) -> float64 array`` over ``[0, n)`` in chunks; each finished chunk is
    saved in ``work_dir`` and reused by a resumed run."""
    out = np.empty(n, dtype=np.float64)
    for start in range(0, n, chunk):
        end = min(start + chunk, n)
        path = work_dir / f"{name}.{start:09d}-{end:09d}.npy" if work_dir is not None else None
        done = None
        if path is not None and path.is_file():  # a damaged one is computed again (warned)
            done = cached_npy(path, "score chunk", np.float64, (end - start,), mmap=False)
        if done is not None:
            out[start:end] = done
        else:
            out[start:end] = np.asarray(compute(start, end), dtype=np.float64)
            if path is not None:
                write_npy(path, out[start:end], "score chunk")
    return out


def forced_scores(model, src_idx: np.ndarray, tgt_idx: np.ndarray, src_texts: Sequence[str],
                  tgt_texts: Sequence[str], *, work_dir: Optional[Path] = None,
                  name: str = "scores", chunk: Optional[int] = None, progress: bool = False,
                  desc: str = "exact scores", precision: str = "fp32", coverage: bool = False):
    """``(score, n_tokens)``: log P(y|x) of every pair ``(src_texts[src_idx[i]],
    tgt_texts[tgt_idx[i]])`` by teacher forcing (EOS included), and the target's token count;
    with ``coverage`` also the rows of :data:`triemine.scoring.rows.JUDGE_ROWS`, one array
    each (``uncovered``: the share of each pair's source pieces its target leaves uncovered,
    NaN for the empty source; ``eos_lp`` and ``tok_min_lp``), which needs ``work_dir=None``
    (their chunks are not saved).

    A source index of ``-1`` is the empty source: the pair's score is the target's prior
    log P(y|empty).  Chunks of ``chunk`` pairs (default :func:`score_chunk`) are saved in
    ``work_dir``
    as ``<name>.<start>-<end>.npy`` and reused by a resumed run.
    ``precision``: see :class:`~triemine.scoring.forced.ForcedScorer`.
    """
    from tqdm import tqdm

    src_idx = np.asarray(src_idx, dtype=np.int64)
    tgt_idx = np.asarray(tgt_idx, dtype=np.int64)
    real = src_idx >= 0
    srcs, local = _encoded(model.encode_source, src_texts, src_idx[real])
    src_slot = np.full(len(src_idx), len(srcs), dtype=np.int64)  # the empty source's slot,
    src_slot[real] = local                                        # after the lines' (in order)
    srcs.append(None)
    tgts, tgt_slot = _encoded(model.encode_target, tgt_texts, tgt_idx)
    ntok = np.fromiter((len(tgts[t]) for t in tgt_slot.tolist()), dtype=np.float64,
                       count=len(tgt_idx))
    scorer = forced_scoring().ForcedScorer(model, precision=precision)
    if coverage and work_dir is not None:
        raise ValueError("coverage is computed with the scores, never read from saved chunks")
    judged = np.full((len(JUDGE_ROWS), len(src_idx)), np.nan) if coverage else None
    with tqdm(total=len(src_idx), desc=desc, unit="pair", disable=not progress) as bar:
        def compute(a, b):
            out = scorer.score_pairs(srcs, tgts, src_slot[a:b], tgt_slot[a:b],
                                     coverage=coverage)
            if coverage:
                out, judged[:, a:b] = out
            bar.update(b - a)
            return out
        score = _chunked(work_dir, name, len(src_idx), chunk or score_chunk(len(src_idx)),
                         compute)
    return (score, ntok, *judged) if coverage else (score, ntok)


PRIOR = "prior"  # the column of the targets' priors, log P(y|empty source)


@dataclass(frozen=True)
class ScoreJob:
    """The rules of one direction's exact scores, in one place: the columns they fill, the
    name of their stage and chunk files, and which side the model reads (``reverse``: the
    reverse model reads the targets and writes the sources, log P(x|y))."""

    score: str
    n_tokens: str
    name: str
    desc: str
    reverse: bool

    @classmethod
    def of(cls, reverse: bool = False) -> "ScoreJob":
        suffix = "_rev" if reverse else ""
        return cls("score" + suffix, "n_tokens" + suffix, "scores" + suffix,
                   "exact scores" + (" (reverse)" if reverse else ""), reverse)

    def sides(self, src, tgt):
        """``(what the model reads, what it writes)`` of a source and a target side."""
        return (tgt, src) if self.reverse else (src, tgt)


def exact_scores(model, cands: CandidateSet, src_texts: Sequence[str], tgt_texts: Sequence[str],
                 work_dir: Optional[Path] = None, chunk: Optional[int] = None,
                 progress: bool = False, reverse: bool = False, precision: str = "fp32",
                 scores=None) -> CandidateSet:
    """Fill ``score`` and ``n_tokens`` where they are missing (NaN) by forced decoding
    (:func:`forced_scores`).

    With ``reverse``, ``model`` translates the other way (target language -> source language)
    and the columns are ``score_rev``/``n_tokens_rev``: log P(x|y) of every pair.
    ``scores(in_idx, out_idx, name, desc) -> (score, n_tokens)`` computes them elsewhere (the
    sharded :func:`triemine.mining.score_shards.exact_scores_sharded`: the same chunks, the same
    bits); by default :func:`forced_scores` in this process.
    """
    job = ScoreJob.of(reverse)
    score = cands.col_or_nan(job.score).copy()
    ntok = cands.col_or_nan(job.n_tokens).copy()
    todo = np.flatnonzero(np.isnan(score))
    if len(todo):
        ins, outs = job.sides(src_texts, tgt_texts)
        in_idx, out_idx = job.sides(cands.src[todo], cands.tgt[todo])
        name, desc = job.name, job.desc
        if scores is None:
            score[todo], ntok[todo] = forced_scores(
                model, in_idx, out_idx, ins, outs, work_dir=work_dir, name=name, chunk=chunk,
                progress=progress, precision=precision, desc=desc)
        else:
            score[todo], ntok[todo] = scores(in_idx, out_idx, name, desc)
    return cands.with_columns(**{job.score: score, job.n_tokens: ntok})


def corpus_key(model, texts: Sequence[str], what: str = "") -> str:
    """A cache key for a per-corpus result of ``model`` (its weights, not its path) on ``texts``;
    ``what`` names the result and its settings when it is not the targets' prior."""
    digest = model.weights_digest if getattr(model, "path", None) is not None else "unknown"
    h = hashlib.sha256(digest.encode())
    if what:
        h.update(b"\0" + what.encode("utf-8") + b"\0")
    for t in texts:
        h.update(t.encode("utf-8"))
        h.update(b"\n")
    return h.hexdigest()[:32]


def target_priors(model, tgt_texts: Sequence[str], lines: np.ndarray, trie=None, node_prior=None,
                  cache_dir: Optional[Path] = None, progress: bool = False,
                  precision: str = "fp32", scores=None) -> np.ndarray:
    """log P(target line | empty source) for each of ``lines`` (:func:`prior_table`)."""
    lines = np.asarray(lines, dtype=np.int64)
    return np.asarray(prior_table(model, tgt_texts, lines, trie, node_prior, cache_dir, progress,
                                  precision, scores)[lines])


# target lines whose missing priors are found and computed together (one ``scores`` call, one
# sharded job of the mining job): what the driver holds of them is this range's (the needed
# lines and their scores, 16 bytes a line), not the corpus's; a corpus of up to 4M lines is one
# range, so its chunks, and bits, are those of a single call
PRIOR_RANGE = 1 << 22


def prior_range(line: int) -> int:
    """The range (of ``PRIOR_RANGE`` lines) target line ``line`` is computed in."""
    return int(line) // PRIOR_RANGE


def prior_table(model, tgt_texts: Sequence[str], lines: np.ndarray, trie=None, node_prior=None,
                cache_dir: Optional[Path] = None, progress: bool = False,
                precision: str = "fp32", scores=None, work: Optional[Path] = None,
                device: str = "cpu", keep: bool = True) -> np.ndarray:
    """log P(target line | empty source) of every target line (NaN where unknown), computed
    for ``lines`` (line numbers, or a boolean mask over the lines) where not yet known, on
    ``device`` (which the cache's key names off the CPU: other products, other bits).

    With a trie and its node priors a line of the trie has the prior of its terminal node
    (free; the table is then in memory, 8 bytes a line beside the trie's own).  The other needed
    lines are scored by teacher forcing, ``PRIOR_RANGE`` lines at a time, and cached in
    ``cache_dir/<corpus+model key>.npy`` (one value per target line, NaN until computed; only
    teacher-forced values), so a later run on the same target corpus only computes what is new.
    With a cache the table is that file, memory-mapped (read-only): the new values of each
    range wait in ``work/priors.new/`` (in memory without ``work``) and are written with the old
    ones into a copy that replaces the cache once every range is done, so the driver never
    holds 8 bytes a target line, and the cache's temporary file lives only while it is written.
    ``scores(lines) -> priors`` computes one range's needed lines (sorted; default:
    :func:`forced_scores` with the empty source, in this process; the mining job passes its
    shards, :func:`triemine.mining.score_shards.forced_score_shards`: the same chunks, the same
    bits).  ``keep=False`` reads the cache but never adds to it (the table is then in memory):
    for a stage whose lines depend on more than the corpus (the second look's), so that what it
    computed never changes the bits a later job's own lines get.
    """
    n = len(tgt_texts)
    lines = np.asarray(lines)
    if lines.dtype == bool:
        if lines.shape != (n,):
            raise ValueError(f"a mask of {lines.shape} for {n} target lines")
        wanted = lines
    else:
        wanted = np.zeros(n, dtype=bool)  # one byte a line
        wanted[lines.astype(np.int64, copy=False)] = True
    if trie is not None and node_prior is not None and precision == "fp32":
        table = np.full(n, np.nan)
        for ids, per_id in _term_ranges(trie, node_prior):
            table[ids] = per_id
        rest = wanted & np.isnan(table)
        if rest.any():
            forced = prior_table(model, tgt_texts, rest, cache_dir=cache_dir, progress=progress,
                                 precision=precision, scores=scores, work=work, device=device,
                                 keep=keep)
            for a in range(0, n, PRIOR_RANGE):
                part = slice(a, a + PRIOR_RANGE)
                table[part] = np.where(rest[part], forced[part], table[part])
        return table
    path = old = None
    if cache_dir is not None and n:
        cache_dir.mkdir(parents=True, exist_ok=True)
        # forced: no node priors (which older caches held); no bits of older code or another device
        what = (f"prior/{precision}/forced/arithmetic "
                f"{forced_scoring().arithmetic(device, precision)}")
        path = cache_dir / f"{corpus_key(model, tgt_texts, what)}.npy"
        old = cached_npy(path, "priors cache", np.float64, (n,))
    spill = None if work is None else Path(work) / "priors.new"
    if spill is not None:
        shutil.rmtree(spill, ignore_errors=True)  # a killed run's: recomputed from its shards
    new = _new_priors(model, tgt_texts, old, wanted, progress, precision, scores, spill)
    if not new:
        return old if old is not None else np.broadcast_to(np.nan, n)
    if path is None or not keep:
        table = np.array(old) if old is not None else np.full(n, np.nan)
        for need, vals in new.values():
            table[need] = vals
        return table
    with npy_writer(path, np.float64, (n,), "priors cache") as f:  # old and new, then renamed
        offset = f.f.tell()
        for a in range(0, n, PRIOR_RANGE):
            chunk = np.array(old[a:a + PRIOR_RANGE]) if old is not None else \
                np.full(min(PRIOR_RANGE, n - a), np.nan)
            if a in new:
                need, vals = new[a]
                chunk[need - a] = vals
            f.write(chunk.tobytes())
        f.flush()
        # this file's map, not the path's: another job may rename its own table over it next
        table = np.memmap(f.name, dtype=np.float64, mode="r", offset=offset, shape=(n,))
    if spill is not None:
        shutil.rmtree(spill, ignore_errors=True)
    return table


def _new_priors(model, tgt_texts, old, wanted: np.ndarray, progress, precision, scores,
                spill: Optional[Path]) -> dict:
    """``{first line of a range: (needed lines, their priors)}`` for the ranges with wanted
    lines that ``old`` lacks (all of them without ``old``), by ``scores`` (or in this process);
    with ``spill``, each range's arrays go to files there and are kept as their maps."""
    new = {}
    for a in range(0, len(wanted), PRIOR_RANGE):  # range prior_range(a)
        have = wanted[a:a + PRIOR_RANGE]
        if old is not None:
            have = have & np.isnan(old[a:a + PRIOR_RANGE])
        need = a + np.flatnonzero(have)
        if not len(need):
            continue
        logger.info("computing the prior of %d target sentences (lines %d-%d)", len(need),
                    need[0] + 1, need[-1] + 1)
        if scores is None:
            vals = forced_scores(model, np.full(len(need), -1), need, [], tgt_texts,
                                 progress=progress, desc="priors", precision=precision)[0]
        else:
            vals = np.asarray(scores(need), dtype=np.float64)
        if spill is not None:  # two files a range, written from the arrays, read back mapped
            spill.mkdir(parents=True, exist_ok=True)
            files = (spill / f"{a}.lines.npy", spill / f"{a}.priors.npy")
            for path, arr in zip(files, (need, vals)):
                write_npy(path, arr, "new priors")
            need, vals = (load_npy(path, "new priors", written=True) for path in files)
        new[a] = (need, vals)
    return new


def _term_ranges(trie, node_prior):
    """``(ids, priors)`` of the trie's terminal lines, a slice of its terminal nodes at a
    time."""
    nodes = np.asarray(trie.term_nodes)
    offs = np.asarray(trie.term_offsets)
    ids = np.asarray(trie.term_ids)
    node_prior = np.asarray(node_prior)
    for a in range(0, len(nodes), PRIOR_RANGE):
        b = min(a + PRIOR_RANGE, len(nodes))
        o = offs[a:b + 1].astype(np.int64)
        yield (ids[o[0]:o[-1]].astype(np.int64),
               np.repeat(node_prior[nodes[a:b]].astype(np.float64), np.diff(o)))


_NONZERO_DIGITS = frozenset("123456789")


def _nonzero_digits(text: str) -> list:
    return [c for c in decades(text) if c in _NONZERO_DIGITS]


def numeral_agreement(src: str, tgt: str) -> float:
    """How well the numbers written in digits agree: 1.0 (no evidence) unless both sides contain
    non-zero digits (after NFKC, so full-width digits count, and so do ² or ½; a decade of a
    numbered century as its first year, :func:`triemine.judging.numbers.decades`), else the
    similarity ratio (:class:`difflib.SequenceMatcher`) of their sequences of non-zero digits
    (OpusFilter's NonZeroNumeralsFilter).

    Zeros are ignored because units move them ("5万" = "50,000"); a side without digits says
    nothing, since numbers are often written in words or characters ("五", "ninety").  Written
    for near-paraphrases that differ in a year or a measurement ("2015年11月" vs "November 2016").
    """
    a, b = _nonzero_digits(src), _nonzero_digits(tgt)
    if not a or not b:
        return 1.0
    return difflib.SequenceMatcher(None, a, b, autojunk=False).ratio()


@dataclass(frozen=True)
class DerivedScore:
    """A score computed from other columns when the TSV is written (:func:`derived`):
    ``needs``, the columns it reads (producers' columns or derived scores declared before it);
    ``compute(cols, src_texts, tgt_texts)`` its values (``cols``: the candidates' columns and the
    scores derived before it, by name; ``src_texts``/``tgt_texts``: each pair's texts, the
    sources' None when :func:`derived` is not given them, where ``texts`` scores are skipped)."""

    name: str
    needs: Tuple[str, ...]
    compute: Callable[..., np.ndarray]
    texts: bool = False


DERIVED: Dict[str, DerivedScore] = {}  # in declaration order, the order they are computed in


def derive(name: str, needs: Sequence[str] = (), texts: bool = False):
    """Declare a derived score: decorate its ``compute`` (:class:`DerivedScore`).  A score
    named in :mod:`triemine.filtering.registry` and declared here is computed for every job
    whose producers write its ``needs``, and a combination may use it."""
    def register(compute):
        DERIVED[name] = DerivedScore(name, tuple(needs), compute, texts)
        return compute
    return register


def derivable(columns: Iterable[str]) -> Set[str]:
    """``columns`` and every score derived from them (:data:`DERIVED`)."""
    have = set(columns)
    for d in DERIVED.values():
        if set(d.needs) <= have:
            have.add(d.name)
    return have


@derive("ce_word", ("score",))
def _ce_word(cols, _src, tgt_texts):
    nwords = np.fromiter((word_count(t) for t in tgt_texts), dtype=np.float64,
                         count=len(tgt_texts))
    return ce_word(cols["score"], nwords)


derive("ce_token", ("score", "n_tokens"))(lambda c, _s, _t: ce_token(c["score"], c["n_tokens"]))
derive("pmi", ("score", "prior", "n_tokens"))(
    lambda c, _s, _t: pmi(c["score"], c["prior"], c["n_tokens"]))
derive("ce_token_rev", ("score_rev", "n_tokens_rev"))(
    lambda c, _s, _t: ce_token(c["score_rev"], c["n_tokens_rev"]))
# dual conditional cross-entropy (Junczys-Dowmunt, 2018)
derive("dual_ce", ("ce_token", "ce_token_rev"))(
    lambda c, _s, _t: np.abs(c["ce_token"] - c["ce_token_rev"])
    + 0.5 * (c["ce_token"] + c["ce_token_rev"]))


@derive("numerals", texts=True)
def _numerals(_cols, src_texts, tgt_texts):
    return np.fromiter((numeral_agreement(s, t) for s, t in zip(src_texts, tgt_texts)),
                       dtype=np.float64, count=len(tgt_texts))


def derived(cands: CandidateSet, tgt_texts: Sequence[str], src_texts: Optional[Sequence[str]] = None
            ) -> CandidateSet:
    """Every :data:`DERIVED` score whose columns ``cands`` has, in declaration order (``ce_word``,
    ``ce_token``, with ``prior`` ``pmi``, with a reverse model's scores ``ce_token_rev`` and
    ``dual_ce``); with ``src_texts``, the ones that read the texts too (``numerals``,
    :func:`numeral_agreement`).  ``tgt_texts``/``src_texts`` are indexed by the candidates'
    line ids."""
    cols = {}
    tgt = [tgt_texts[t] for t in cands.tgt.tolist()]
    src = [src_texts[s] for s in cands.src.tolist()] if src_texts is not None else None
    have = dict(cands.columns)
    for d in DERIVED.values():
        if set(d.needs) <= set(have) and (src is not None or not d.texts):
            cols[d.name] = have[d.name] = d.compute(have, src, tgt)
    return cands.with_columns(**cols)
