"""The seed papers' own evaluation protocols, on score matrices of held-out pairs.

Every function takes a score matrix ``S`` of shape ``(n, N)``: row ``i`` is source ``i``,
column ``j`` a candidate target, higher is better (``-inf``: never proposed, e.g. a pair outside
trie-mine's candidates), and source ``i``'s translation in column ``gold[i]`` (``-1``: none).

* :func:`cartesian_f1` -- Grégoire & Langlais (2017): every source against every target of a
  set in which a share of the translations was replaced by non-translations ("noise ratio");
  precision, recall and F1 of the threshold that maximises F1 over the whole product.
* :func:`noisy_columns` -- which columns such a set holds at each noise ratio.
* :func:`recovery_error` -- Kim et al. (2019): shuffle one side of a parallel set, take each
  sentence's best-scored partner, both ways; the share of wrong partners.
* :func:`precision_at` -- Guo et al. (2018): P@k of each source's translation among a pool.
* :func:`score_matrix` -- a baseline's matrix (centred cosine of its vectors, or its pair head
  over the whole product), :func:`ratio_margin` -- LASER's margin of a dense cosine matrix,
  :func:`levenshtein_matrix` -- Kim et al.'s string baseline (normalised edit distance, negated).
"""
from __future__ import annotations

from typing import Dict, Iterable, Optional, Sequence, Tuple

import numpy as np

from triemine.errors import InputError


def _check(scores: np.ndarray, gold: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    scores = np.asarray(scores, dtype=np.float64)
    gold = np.asarray(gold, dtype=np.int64)
    if scores.ndim != 2 or gold.shape != (scores.shape[0],):
        raise InputError(f"score matrix {scores.shape} and gold {gold.shape} do not fit")
    if (gold >= scores.shape[1]).any():
        raise InputError("a gold column lies outside the score matrix")
    if np.isnan(scores).any():
        raise InputError("the score matrix holds NaN")
    return scores, gold


def best_f1(scores: np.ndarray, labels: np.ndarray) -> Dict[str, float]:
    """``{"threshold", "P", "R", "F1"}`` of the cut (keep ``score >= threshold``) with the best F1
    of binary ``labels`` (1-d, aligned with ``scores``); pairs at ``-inf`` are never kept."""
    scores, labels = np.asarray(scores, dtype=np.float64), np.asarray(labels, dtype=bool)
    n_gold = int(labels.sum())
    finite = np.isfinite(scores)
    s, y = scores[finite], labels[finite]
    if not n_gold or not len(s):
        return {"threshold": float("inf"), "P": 0.0, "R": 0.0, "F1": 0.0}
    order = np.argsort(-s, kind="stable")
    s, y = s[order], y[order]
    # a cut can only fall between distinct scores: the last position of each run of ties
    last = np.r_[s[1:] != s[:-1], True]
    tp = np.cumsum(y)[last]
    kept = (np.arange(1, len(s) + 1))[last]
    f1 = 2 * tp / (kept + n_gold)
    i = int(np.argmax(f1))
    return {"threshold": float(s[last][i]), "P": round(float(tp[i] / kept[i]), 4),
            "R": round(float(tp[i] / n_gold), 4), "F1": round(float(f1[i]), 4)}


def noisy_columns(n: int, noise: int, ratio: float, seed: int = 0) -> Tuple[np.ndarray, np.ndarray]:
    """The target columns of a set of ``n`` translations at noise ``ratio``: ``round(ratio * n)``
    translations (a seeded choice, nested: a higher ratio replaces a superset) are replaced by
    non-translations, columns ``n ..`` of a matrix whose first ``n`` columns are the
    translations and the next ``noise`` columns the non-translations.

    Returns ``(columns (n,), gold (n,))``: the matrix columns of the set and, per source, the
    position of its translation in ``columns`` (``-1``: replaced)."""
    if not 0.0 <= ratio < 1.0:
        raise InputError(f"noise ratio must be in [0, 1), got {ratio}")
    m = int(round(ratio * n))
    if m > noise:
        raise InputError(f"noise ratio {ratio} needs {m} non-translations, only {noise} given")
    replaced = np.random.default_rng(seed).permutation(n)[:m]
    cols = np.arange(n)
    cols[replaced] = n + np.arange(m)
    gold = np.arange(n)
    gold[replaced] = -1
    return cols, gold


def cartesian_f1(scores: np.ndarray, gold: np.ndarray) -> Dict[str, float]:
    """Best-threshold P/R/F1 (:func:`best_f1`) over every cell of ``scores (n, N)``, the gold
    cells being ``(i, gold[i])``; plus ``pairs`` (n * N) and ``gold`` (translations present)."""
    scores, gold = _check(scores, gold)
    labels = np.zeros(scores.shape, dtype=bool)
    has = gold >= 0
    labels[np.flatnonzero(has), gold[has]] = True
    out = best_f1(scores.reshape(-1), labels.reshape(-1))
    out.update(pairs=int(scores.size), gold=int(has.sum()))
    return out


def _best(scores: np.ndarray, axis: int) -> Tuple[np.ndarray, np.ndarray]:
    """Argmax along ``axis`` and whether that row/column has any finite score."""
    return scores.argmax(axis=axis), np.isfinite(scores).any(axis=axis)


def recovery_error(scores: np.ndarray) -> Dict[str, float]:
    """Kim et al.'s alignment recovery on a square matrix whose diagonal holds the translations:
    ``src_to_tgt`` (share of sources whose best target is not theirs), ``tgt_to_src`` (the same
    for targets) and ``both`` (their mean), in percent; a row without any finite score is an
    error.  Ties go to the lowest index (the shuffle is the caller's: the matrix's order is
    irrelevant to the argmax except for ties)."""
    scores, _ = _check(scores, np.arange(len(scores)))
    if scores.shape[0] != scores.shape[1]:
        raise InputError(f"recovery needs a square matrix, got {scores.shape}")
    n = len(scores)
    fwd, fwd_ok = _best(scores, 1)
    bwd, bwd_ok = _best(scores, 0)
    e1 = float(np.mean(~fwd_ok | (fwd != np.arange(n))))
    e2 = float(np.mean(~bwd_ok | (bwd != np.arange(n))))
    return {"src_to_tgt": round(100 * e1, 2), "tgt_to_src": round(100 * e2, 2),
            "both": round(50 * (e1 + e2), 2), "sentences": n}


def precision_at(scores: np.ndarray, gold: np.ndarray,
                 ks: Iterable[int] = (1, 3, 10)) -> Dict[str, float]:
    """``{"P@k": percent of sources whose translation is among their k best columns}`` (a gold
    cell at ``-inf`` never counts; ties are broken against the gold cell), ``pool`` (N),
    ``queries`` (n)."""
    scores, gold = _check(scores, gold)
    g = scores[np.arange(len(gold)), gold]
    # rank of the gold cell: columns scoring at least as high, the gold cell itself excluded
    rank = (scores >= g[:, None]).sum(axis=1) - 1
    found = np.isfinite(g) & (gold >= 0)
    out = {f"P@{k}": round(100 * float(np.mean(found & (rank < k))), 2) for k in ks}
    out.update(pool=int(scores.shape[1]), queries=int(scores.shape[0]))
    return out


def ratio_margin(cos: np.ndarray, k: int = 4) -> np.ndarray:
    """LASER's ratio margin of every cell of a dense cosine matrix ``(n, N)``: the cosine over
    the mean of the source's and the target's average cosine with their ``k`` nearest
    neighbours (within the matrix)."""
    cos = np.asarray(cos, dtype=np.float64)
    kr, kc = min(k, cos.shape[1]), min(k, cos.shape[0])
    r = -np.partition(-cos, kr - 1, axis=1)[:, :kr].mean(axis=1)
    c = -np.partition(-cos, kc - 1, axis=0)[:kc].mean(axis=0)
    return cos / np.maximum((r[:, None] + c[None, :]) / 2, 1e-9)


def _unit_centred(x: np.ndarray, centre: bool) -> np.ndarray:
    x = np.asarray(x, dtype=np.float32)
    if centre and len(x) > 1:
        x = x - x.mean(axis=0, keepdims=True)
    return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)


def cosine_matrix(src: np.ndarray, tgt: np.ndarray, centre: bool = True) -> np.ndarray:
    """``(n, N)`` cosines of two sets of vectors, each side first centred on its own mean when
    ``centre`` (as the baselines' first stage does)."""
    return _unit_centred(src, centre) @ _unit_centred(tgt, centre).T


def score_matrix(baseline, src_texts: Sequence[str], tgt_texts: Sequence[str], kind: str = "cos",
                 chunk: int = 200_000,
                 vectors: Optional[Tuple[np.ndarray, np.ndarray]] = None) -> np.ndarray:
    """A baseline's ``(n, N)`` scores of every (source, target) pair: ``kind`` "cos" (centred
    cosine of its sentence vectors, ``baseline.centre``), "margin" (ratio margin of that, k =
    ``baseline.neighbours``) or "head" (its pair classifier on every pair, in chunks of
    ``chunk`` pairs).  ``vectors``: the two sides' encodings when already computed."""
    src, tgt = vectors if vectors is not None else (baseline.encode(list(src_texts), "src"),
                                                    baseline.encode(list(tgt_texts), "tgt"))
    if kind in ("cos", "margin"):
        cos = cosine_matrix(src, tgt, getattr(baseline, "centre", True))
        return ratio_margin(cos,
                            baseline.neighbours) if kind == "margin" else cos.astype(np.float64)
    if kind != "head":
        raise InputError(f"unknown score kind {kind!r} (cos, margin, head)")
    if not baseline.has_head:
        raise InputError(f"{baseline.name} has no pair head")
    n, m = len(src), len(tgt)
    out = np.empty(n * m, dtype=np.float64)
    rows = max(1, chunk // max(m, 1))
    for s in range(0, n, rows):
        e = min(n, s + rows)
        si = np.repeat(np.arange(s, e), m)
        ti = np.tile(np.arange(m), e - s)
        out[s * m:e * m] = baseline.head(src[si], tgt[ti])
    return out.reshape(n, m)


def _add(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a + b`` of multi-word unsigned integers ``(W, P)``, word 0 the lowest (wrapping)."""
    out = np.empty_like(a)
    carry = np.zeros(a.shape[1], dtype=np.uint64)
    for w in range(a.shape[0]):
        s = a[w] + b[w]
        c1 = s < a[w]
        out[w] = s + carry
        carry = (c1 | (out[w] < s)).astype(np.uint64)
    return out


def _shl1(x: np.ndarray, low: int) -> np.ndarray:
    """``(x << 1) | low`` of multi-word integers ``(W, P)``."""
    out = x << np.uint64(1)
    out[1:] |= x[:-1] >> np.uint64(63)
    out[0] |= np.uint64(low)
    return out


def _myers_block(sources: Sequence[str], words: int, ids_t: np.ndarray, alphabet: Dict[str, int],
                 lengths: np.ndarray) -> np.ndarray:
    """Edit distances ``(len(sources), n)`` of sources of at most ``64 * words`` characters to a
    block of ``n`` targets by Myers' bit-parallel algorithm (Hyyrö's global-distance form), every
    (source, target) pair one lane of ``words``-word integers: one step a target column.
    ``ids_t``: ``(L, n)`` the targets' characters as ``alphabet`` ids (0: padding or a character
    outside ``alphabet``), ``lengths``: ``(n,)``."""
    ns, (L, n) = len(sources), ids_t.shape
    table = np.zeros((words, ns, len(alphabet) + 1), dtype=np.uint64)
    mask = np.zeros((words, ns), dtype=np.uint64)
    top = np.zeros((words, ns), dtype=np.uint64)
    for i, s in enumerate(sources):
        for k, ch in enumerate(s):
            a = alphabet.get(ch, 0)
            if a:
                table[k // 64, i, a] |= np.uint64(1 << (k % 64))
        m = len(s)
        for w in range(words):
            bits = min(max(m - 64 * w, 0), 64)
            mask[w, i] = np.uint64((1 << bits) - 1)
        if m:
            top[(m - 1) // 64, i] = np.uint64(1 << ((m - 1) % 64))
    src_of = np.repeat(np.arange(ns), n)                         # lanes: source-major
    mask, top = mask[:, src_of], top[:, src_of]
    live_len = np.tile(lengths, ns)
    pv, mv = mask.copy(), np.zeros_like(mask)
    score = np.repeat(np.array([len(s) for s in sources], dtype=np.int64), n)
    for j in range(L):
        eq = table[:, src_of, np.tile(ids_t[j], ns)]             # (W, P)
        xv = eq | mv
        xh = ((_add(eq & pv, pv) & mask) ^ pv) | eq
        ph = (mv | ~(xh | pv)) & mask
        mh = pv & xh
        live = j < live_len
        score += live & ((ph & top) != 0).any(axis=0)
        score -= live & ((mh & top) != 0).any(axis=0)
        ph, mh = _shl1(ph, 1) & mask, _shl1(mh, 0) & mask
        pv = np.where(live, (mh | ~(xv | ph)) & mask, pv)
        mv = np.where(live, ph & xv, mv)
    # an empty source: the distance is the target's length
    score = score.reshape(ns, n)
    empty = np.array([len(s) == 0 for s in sources])
    score[empty] = lengths[None, :]
    return score


def levenshtein_matrix(src_texts: Sequence[str], tgt_texts: Sequence[str],
                       block: int = 128) -> np.ndarray:
    """``(n, N)`` minus the character edit distance of every pair, divided by the longer
    string's length (0: identical, -1: nothing in common); exact, by Myers' bit-parallel
    algorithm vectorised over all (source, target) pairs of a block of targets (length-sorted
    blocks of ``block``; sources grouped by how many 64-bit words they need)."""
    src_texts, tgt_texts = list(src_texts), list(tgt_texts)
    lt = np.array([len(t) for t in tgt_texts], dtype=np.int64)
    ls = np.array([len(s) for s in src_texts], dtype=np.int64)
    out = np.empty((len(src_texts), len(tgt_texts)), dtype=np.float64)
    if not len(tgt_texts) or not len(src_texts):
        return out
    words = np.maximum((ls + 63) // 64, 1)
    order = np.argsort(lt, kind="stable")
    for b in range(0, len(order), block):
        cols = order[b:b + block]
        lb = lt[cols]
        codes = np.full((len(cols), max(int(lb.max()), 1)), -1, dtype=np.int32)
        for r, j in enumerate(cols):
            codes[r, :lb[r]] = np.frombuffer(tgt_texts[j].encode("utf-32-le"), dtype=np.int32)
        # the block's characters as ids of one alphabet (0: padding)
        chars, inv = np.unique(codes, return_inverse=True)
        shift = 0 if chars[0] == -1 else 1
        ids_t = np.ascontiguousarray((inv.reshape(codes.shape) + shift).astype(np.int32).T)
        alphabet = {chr(c): i + shift for i, c in enumerate(chars) if c >= 0}
        for w in np.unique(words):
            rows = np.flatnonzero(words == w)
            # lanes per step: keep each batch of sources near 64k (source, target) pairs
            step = max(1, 65536 // (len(cols) * int(w)))
            for s0 in range(0, len(rows), step):
                r = rows[s0:s0 + step]
                dist = _myers_block([src_texts[i] for i in r], int(w), ids_t, alphabet, lb)
                out[np.ix_(r, cols)] = -dist / np.maximum(np.maximum(lb[None, :], ls[r, None]), 1)
    return out
