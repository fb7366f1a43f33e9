"""The feature-based parallel-sentence classifier that Grégoire & Langlais (2017) compare their
BiRNN with (in the spirit of Munteanu & Marcu 2005): a logistic regression over a few pair
features, trained on the same positives and random negatives as the BiRNN.

Features of a pair (source ``s``, target ``t``), computed for whole score matrices at once with
sparse products:

* ``cover_t``/``cover_s``: the share of ``t``'s (``s``'s) distinct pieces that have a
  translation among ``s``'s (``t``'s) pieces, by a bilingual piece dictionary learnt from the
  training pairs (each source piece's ``per_piece`` best target pieces by Dice coefficient,
  co-occurring at least twice);
* ``len_dev``: ``|log(len t / len s) - mean over the training pairs|`` (characters);
* ``anchors``: Jaccard overlap of the pairs' digit and Latin-letter tokens (numbers, names,
  codes) and ``no_anchor`` (neither side has one).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import List, Sequence

import numpy as np
from scipy import sparse

from triemine.errors import InputError

ANCHOR = re.compile(r"[0-9]+|[A-Za-z]+")
FEATURES = ("cover_t", "cover_s", "len_dev", "anchors", "no_anchor")


def _binary(id_lists: Sequence[Sequence[int]], vocab: int) -> sparse.csr_matrix:
    """``(n, vocab)`` 0/1 matrix of which ids each list holds."""
    rows = np.repeat(np.arange(len(id_lists)), [len(x) for x in id_lists])
    cols = np.fromiter((i for x in id_lists for i in x), dtype=np.int64, count=len(rows))
    m = sparse.csr_matrix((np.ones(len(rows), dtype=np.float32), (rows, cols)),
                          shape=(len(id_lists), vocab))
    m.data[:] = 1.0  # duplicates were summed
    return m


def _anchors(texts: Sequence[str]) -> List[List[str]]:
    return [sorted({a.lower() for a in ANCHOR.findall(t)}) for t in texts]


@dataclass
class FeatureConfig:
    per_piece: int = 3
    min_count: int = 2
    negatives: int = 7
    seed: int = 1


class FeatureBaseline:
    """Logistic regression over :data:`FEATURES` (module docstring).  Not a miner (it has no
    sentence vectors): ``matrix(src, tgt)`` scores every pair of two lists,
    ``pair_features(src, tgt, rows, cols)`` gives the ``(len(rows), 5)`` features of chosen pairs;
    ``stats``: the dictionary's size, training accuracy and the regression's weights."""

    name = "features"

    def __init__(self, tokenizer, dictionary: sparse.csr_matrix, len_mean: float, model,
                 config: FeatureConfig, stats: dict):
        self.tokenizer, self.dictionary, self.len_mean = tokenizer, dictionary, len_mean
        self.model, self.config, self.stats = model, config, dict(stats)

    @classmethod
    def train(cls, tokenizer, data, config: FeatureConfig = FeatureConfig()) -> "FeatureBaseline":
        """Learn the dictionary and the regression from ``data``
        (:class:`~triemine.baselines.text.TrainingPairs`): each pair and ``negatives`` random
        other targets."""
        from sklearn.linear_model import LogisticRegression

        if len(data.src) < 2:
            raise InputError(f"features: at least 2 training pairs are needed, got {len(data.src)}")
        V = tokenizer.vocab_size
        xs = _binary(tokenizer.ids(data.src, "src"), V)
        xt = _binary(tokenizer.ids(data.tgt, "tgt"), V)
        co = (xs.T @ xt).tocoo()                                    # (V, V) co-occurrence
        fs, ft = np.asarray(xs.sum(0)).ravel(), np.asarray(xt.sum(0)).ravel()
        keep = co.data >= config.min_count
        r, c, n = co.row[keep], co.col[keep], co.data[keep]
        dice = 2 * n / (fs[r] + ft[c])
        # each source piece's best target pieces
        order = np.lexsort((-dice, r))
        r, c = r[order], c[order]
        rank = np.arange(len(r)) - np.searchsorted(r, r)
        top = rank < config.per_piece
        dictionary = sparse.csr_matrix((np.ones(int(top.sum()), dtype=np.float32),
                                        (r[top], c[top])), shape=(V, V))
        ls = np.log([max(len(t), 1) for t in data.src])
        lt = np.log([max(len(t), 1) for t in data.tgt])
        model = cls(tokenizer, dictionary, float(np.mean(lt - ls)), None, config,
                    {"dictionary_entries": int(top.sum())})
        n = len(data.src)
        rng = np.random.default_rng(config.seed)
        m = min(config.negatives, n - 1)
        neg = (np.arange(n)[:, None] + rng.integers(1, n, size=(n, m))) % n
        si = np.concatenate([np.arange(n), np.repeat(np.arange(n), m)])
        ti = np.concatenate([np.arange(n), neg.reshape(-1)])
        X = model.pair_features(data.src, data.tgt, si, ti)
        y = np.concatenate([np.ones(n), np.zeros(n * m)])
        model.model = LogisticRegression(max_iter=1000).fit(X, y)
        model.stats["train_accuracy"] = round(float(model.model.score(X, y)), 4)
        model.stats["weights"] = dict(zip(FEATURES, np.round(model.model.coef_[0], 3).tolist()))
        return model

    def _sides(self, src: Sequence[str], tgt: Sequence[str]):
        V = self.tokenizer.vocab_size
        xs = _binary(self.tokenizer.ids(list(src), "src"), V)
        xt = _binary(self.tokenizer.ids(list(tgt), "tgt"), V)
        a_s, a_t = _anchors(src), _anchors(tgt)
        names = {a: i for i, a in enumerate(sorted({a for x in a_s + a_t for a in x}))}
        A = max(len(names), 1)
        anc_s = _binary([[names[a] for a in x] for x in a_s], A)
        anc_t = _binary([[names[a] for a in x] for x in a_t], A)
        ls = np.log([max(len(t), 1) for t in src])
        lt = np.log([max(len(t), 1) for t in tgt])
        return xs, xt, anc_s, anc_t, ls, lt

    def _features(self, sides, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
        """``(len(rows), 5)`` features of pairs (rows[i], cols[i]) of the two sides."""
        xs, xt, anc_s, anc_t, ls, lt = sides
        ns, nt = np.asarray(xs.sum(1)).ravel(), np.asarray(xt.sum(1)).ravel()
        reach_t = (xs @ self.dictionary)                              # (n_s, V): t pieces s covers
        reach_t.data[:] = 1.0
        reach_s = (xt @ self.dictionary.T)                            # (n_t, V): s pieces t covers
        reach_s.data[:] = 1.0

        def rowdot(a, b):  # sum over the vocabulary of a[rows] * b[cols], pairwise
            return np.asarray(a[rows].multiply(b[cols]).sum(1)).ravel()

        cover_t = rowdot(reach_t, xt) / np.maximum(nt[cols], 1)
        cover_s = rowdot(xs, reach_s) / np.maximum(ns[rows], 1)
        len_dev = np.abs(lt[cols] - ls[rows] - self.len_mean)
        inter = rowdot(anc_s, anc_t)
        na, nb = np.asarray(anc_s.sum(1)).ravel()[rows], np.asarray(anc_t.sum(1)).ravel()[cols]
        union = na + nb - inter
        anchors = np.where(union > 0, inter / np.maximum(union, 1), 0.0)
        return np.stack([cover_t, cover_s, len_dev, anchors, (union == 0).astype(float)], axis=1)

    def pair_features(self, src, tgt, rows, cols) -> np.ndarray:
        return self._features(self._sides(src, tgt), np.asarray(rows), np.asarray(cols))

    def matrix(self, src: Sequence[str], tgt: Sequence[str]) -> np.ndarray:
        """``(len(src), len(tgt))`` P(parallel) of every pair (the features as dense matrices,
        from sparse products)."""
        xs, xt, anc_s, anc_t, ls, lt = self._sides(src, tgt)
        ns, nt = np.asarray(xs.sum(1)).ravel(), np.asarray(xt.sum(1)).ravel()
        reach_t = xs @ self.dictionary
        reach_t.data[:] = 1.0
        reach_s = xt @ self.dictionary.T
        reach_s.data[:] = 1.0
        w, b = self.model.coef_[0], float(self.model.intercept_[0])
        z = np.full((len(src), len(tgt)), b)
        z += w[0] * (reach_t @ xt.T).toarray() / np.maximum(nt, 1)[None, :]
        z += w[1] * (xs @ reach_s.T).toarray() / np.maximum(ns, 1)[:, None]
        z += w[2] * np.abs(lt[None, :] - ls[:, None] - self.len_mean)
        inter = (anc_s @ anc_t.T).toarray()
        na, nb = np.asarray(anc_s.sum(1)).ravel(), np.asarray(anc_t.sum(1)).ravel()
        union = na[:, None] + nb[None, :] - inter
        z += w[3] * np.where(union > 0, inter / np.maximum(union, 1), 0.0)
        z += w[4] * (union == 0)
        return 1.0 / (1.0 + np.exp(-z))

    def describe(self) -> dict:
        return dict(self.stats)
