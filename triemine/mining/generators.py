"""The mining job's candidate generators: one small class each, in one registry.

A generator has a ``name`` (what ``--candidates`` lists), an origin ``bit`` (the TSV's ``origin``
bitmask), the feature ``columns`` it gives every pair (what a combination may use; checked before
any work), and :meth:`Generator.run`, which returns its candidates (a column store in the job's
work directory, :mod:`triemine.mining.columns`, sorted by source, then target, so a resumed job
reuses them) and, for a margin space, the space whose features every candidate of the job gets,
whichever generator proposed it.

Adding a generator is one class here with ``@register`` (and its knobs as a node of the settings
tree, :mod:`triemine.mining.settings`); :mod:`triemine.mining.run` loops over the registry.
"""
from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Iterator, Optional, Set, Tuple

import numpy as np

from triemine.decoding.driver import mine_to_tsv
from triemine.decoding.model_spec import inline_model_pool
from triemine.decoding.trie_cache import get_trie
from triemine.distributed.local import InlinePool
from triemine.embedding.embed_shards import embed_corpora
from triemine.embedding.knn_shards import knn_searches
from triemine.mining.candidates import CandidateSet, MarginSpace, embedding_space, translation_space
from triemine.mining.columns import ColumnStore
from triemine.mining.stages import cache_dir, stage
from triemine.mining.translate_shards import cached_translations
from triemine.scoring.prior import get_node_priors
from triemine.io import atomic_write, mined_blocks


@dataclass
class Job:
    """What a generator reads: the model, both corpora, the configuration, where to store stages
    and how to run (``pool``: sharded workers).  The trie generator leaves its trie and node
    priors here for the targets' priors."""

    model: Any
    src: Any                       # triemine.io.corpus.Corpus
    tgt: Any
    source_path: str
    target_path: str
    opts: Any                      # triemine.mining.options.MineOptions: the job's settings tree
    work: Path
    device: str = "cpu"
    progress: bool = False
    pool: Any = None
    trie: Any = None
    node_prior: Any = None
    # lines the job skips as too long (boolean masks; None: none): no generator sees them
    long_src: Any = None
    long_tgt: Any = None
    seconds: Dict[str, float] = field(default_factory=dict)  # wall seconds per stage

    def model_pool(self, model):
        """Where the job's shards that need ``model`` (forced decoding, translation) run: its
        pool, or, without one, this process with ``model`` as loaded
        (:class:`~triemine.distributed.local.InlinePool`; a shard that fails is not tried
        again, as the code would fail the same way).  The same shards either way: the same
        bits, one shard's output in memory at a time, and a killed job resumes at its first
        unfinished shard."""
        if self.pool is not None:
            return self.pool
        return inline_model_pool(model, self.device)

    @contextmanager
    def timed(self, stage: str):
        """Adds the wall time of the ``with`` body to ``seconds[stage]``."""
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[stage] = round(self.seconds.get(stage, 0.0) + time.perf_counter() - t0, 3)


class Generator:
    name = ""
    bit = 0

    def columns(self, opts) -> Set[str]:
        """The feature columns this generator adds to every candidate of the job."""
        return set()

    def run(self, job: Job) -> Tuple[ColumnStore, Optional[MarginSpace]]:
        raise NotImplementedError


REGISTRY: Dict[str, Generator] = {}


def register(cls):
    gen = cls()
    if gen.name in REGISTRY or gen.bit in {g.bit for g in REGISTRY.values()}:
        raise ValueError(f"generator {gen.name!r} or its origin bit {gen.bit} is taken")
    REGISTRY[gen.name] = gen
    return cls


def origin_counts(histogram: np.ndarray) -> Dict[str, int]:
    """How many candidates each generator proposed (a pair may count for several), from the
    number of candidates of each origin bitmask (``histogram[mask]``, 256 entries)."""
    masks = np.arange(len(histogram))
    return {name: int(histogram[(masks & g.bit) > 0].sum()) for name, g in REGISTRY.items()}


@register
class TrieSearch(Generator):
    """The trie-constrained beam search: every match of every source, with its exact ``score``,
    ``n_tokens`` and (with node priors) ``prior``."""

    name, bit = "trie", 1
    block_rows = 1 << 16  # rows of the search's TSV read at a time

    def run(self, job: Job):
        opts = job.opts
        job.trie = get_trie(job.model, job.target_path, opts.search.trie_nbest,
                            progress=job.progress)
        if opts.scores.priors or opts.search.prior_weight:
            job.node_prior = get_node_priors(job.model, job.trie, progress=job.progress)
        with job.timed("trie"):
            search = self._settings(job)
            columns = ["score", "n_tokens"] + (["prior"] if search.priors else [])
            return stage(job.work, self.name, lambda: self._search(job, search, columns),
                         columns=columns), None

    def _settings(self, job: Job):
        return job.opts.job_search()

    def _search(self, job: Job, search, columns) -> Iterator[CandidateSet]:
        tsv = job.work / "trie.tsv"
        mine_to_tsv(job.model, job.source_path, job.target_path, tsv, search=search,
                    pool=job.pool, trie=job.trie if job.opts.search.target_shards == 1 else None,
                    device=job.device, resume=True, progress=job.progress)
        return self._candidates(tsv, columns, len(job.src), len(job.tgt))

    def _candidates(self, tsv: Path, columns, n_src: int, n_tgt: int
                    ) -> Iterator[CandidateSet]:
        """The search's rows (one per match and target line, in source order) as candidate
        blocks, read as a stream: a pair found twice (two segmentations of one line) keeps its
        best row.  A block ends at a source's last row, so every pair of a source is in one
        block; the driver holds one block of rows, not the search's whole output.  Rows out of
        order or naming no line of the corpora are errors naming the file and line."""
        held: Dict[str, np.ndarray] = {}  # the last source's rows, which the next block may
        last, first = 0.0, 2              # continue; the file line of the block's first row
        for block in mined_blocks(tsv, ["src_line", "tgt_line"] + list(columns),
                                  self.block_rows):
            s, t = block["src_line"], block["tgt_line"]
            bad = np.flatnonzero((np.diff(s, prepend=last) < 0) | (s < 1) | (s > n_src)
                                 | (t < 1) | (t > n_tgt) | (s % 1 != 0) | (t % 1 != 0))
            if len(bad):
                i = int(bad[0])
                raise RuntimeError(f"{tsv}:{first + i}: the trie search's row names source line "
                                   f"{s[i]:g} and target line {t[i]:g} (after source line "
                                   f"{(s[i - 1] if i else last):g}; the corpora have {n_src} "
                                   f"and {n_tgt} lines)")
            last, first = s[-1], first + len(s)
            if held:
                block = {k: np.concatenate([held[k], v]) for k, v in block.items()}
            cut = int(np.searchsorted(block["src_line"], block["src_line"][-1], side="left"))
            held = {k: v[cut:] for k, v in block.items()}
            if cut:
                yield self._best({k: v[:cut] for k, v in block.items()}, columns)
        if held:
            yield self._best(held, columns)

    def _best(self, rows: Dict[str, np.ndarray], columns) -> CandidateSet:
        """The rows as candidates, one a pair (its best score's, the earliest of equal ones),
        sorted by source and target."""
        cands = CandidateSet(rows["src_line"].astype(np.int64) - 1,
                             rows["tgt_line"].astype(np.int64) - 1,
                             np.full(len(rows["src_line"]), self.bit, dtype=np.uint8),
                             {c: rows[c] for c in columns})
        return cands.take(np.argsort(-cands.col("score"), kind="stable")).union(
            CandidateSet.empty())


@register
class EncoderKnn(Generator):
    """A multilingual sentence encoder's ratio-margin neighbours (LASER's margin, k = ``k``):
    ``<encoder>_cos`` and ``<encoder>_margin``."""

    name, bit = "knn", 2

    def columns(self, opts) -> Set[str]:
        return {f"{opts.neighbours.encoder}_cos", f"{opts.neighbours.encoder}_margin"}

    def run(self, job: Job):
        """Both corpora embedded in line shards and searched in kNN shards on the job's pool
        (none: in this process, the same shards), so any worker count gives the same bits."""
        nb = job.opts.neighbours
        pool = job.pool if job.pool is not None else InlinePool()
        emb = {side: job.work / f"emb.{nb.encoder}.{side}.npy" for side in ("src", "tgt")}
        with job.timed("embed"):  # both corpora's shards on the pool at once
            xs, ys = embed_corpora(nb.encoder, [
                (job.source_path, len(job.src), emb["src"], job.long_src),
                (job.target_path, len(job.tgt), emb["tgt"], job.long_tgt)],
                                   pool, progress=job.progress)
        with job.timed("knn"):  # both directions' cells at once
            (fwd_sim, fwd_idx), (bwd_sim, bwd_idx) = knn_searches(
                [(emb["src"], emb["tgt"], f"knn.{nb.encoder}.fwd"),
                 (emb["tgt"], emb["src"], f"knn.{nb.encoder}.bwd")], nb.k, job.work, pool,
                progress=job.progress, index=nb.knn_index, device=job.device)
        space = embedding_space(xs, ys, nb.encoder, nb.k, origin=self.bit,
                                neighbours=(fwd_idx, fwd_sim, bwd_idx, bwd_sim), work=job.work)
        # written a range of sources at a time: the driver holds one range's candidates
        return stage(job.work, self.name, lambda: space.candidate_blocks(
            nb.per_source, nb.per_target, nb.min_margin, spill=job.work / "knn.spill"),
            columns=space.columns), space


@register
class TranslationRetrieval(Generator):
    """The MT model's own translations matched against the targets by TF-IDF ratio margin:
    ``ret_cos`` and ``ret_margin``."""

    name, bit = "retrieval", 4

    def columns(self, opts) -> Set[str]:
        return {"ret_cos", "ret_margin"}

    def run(self, job: Job):
        """The translations in line shards on the job's pool (none: in this process, the same
        shards), cached per corpus with their shards
        (:func:`~triemine.mining.translate_shards.cached_translations`); the retrieval over
        them in this process."""
        nb, ret = job.opts.neighbours, job.opts.retrieval
        with job.timed("translate"):
            hyps, _ = cached_translations(job.model, job.source_path, cache_dir("translations"),
                                          job.model_pool(job.model), beam=ret.translate_beam,
                                          device=job.device, progress=job.progress)
        with job.timed("knn"):  # lines skipped as too long: empty, no one's neighbours
            space = translation_space(_blanked(hyps, job.long_src),
                                      _blanked(job.tgt.texts, job.long_tgt), nb.k,
                                      origin=self.bit)
        return stage(job.work, self.name, lambda: space.candidate_blocks(
            nb.per_source, nb.per_target, ret.retrieval_min_margin,
            spill=job.work / "retrieval.spill"), columns=space.columns), space


@register
class TranslationKnn(Generator):
    """The MT model's own translations (beam ``translate_beam``) embedded by the job's encoder
    and searched against the targets' embeddings, English to English: each source's
    ``look_k`` nearest targets with cosine at least ``look_min_cos``.  The second look's
    generator (:mod:`triemine.mining.second_look`, :meth:`propose`); no feature columns of its
    own (the job's margin spaces give every pair theirs)."""

    name, bit = "mt_knn", 8

    def run(self, job: Job):
        """Every source's candidates among every target (the lines the job skips aside)."""
        def lines(n, skip):
            return np.flatnonzero(~skip) if skip is not None else np.arange(n)
        return stage(job.work, self.name, lambda: self.propose(
            job, lines(len(job.src), job.long_src), lines(len(job.tgt), job.long_tgt),
            job.work)), None

    def propose(self, job: Job, sources: np.ndarray, targets: np.ndarray, work: Path,
                tgt_emb: Optional[Path] = None) -> CandidateSet:
        """Candidates of the source lines ``sources`` (0-based, increasing) among the target
        lines ``targets`` (a boolean mask or increasing indices), canonical (sorted by source,
        then target), origin :attr:`bit`, no columns.  The steps run in shards on the job's
        pool (none: in this process, the same shards) and keep their files in ``work`` (the
        sources as a corpus, their translations and embeddings, the search's cells), the
        translations also in the shared cache; the targets' embeddings are ``tgt_emb``
        (default the knn generator's file, ``emb.<encoder>.tgt.npy`` in the job's folder),
        made if missing."""
        sources = np.asarray(sources, dtype=np.int64)
        free = np.zeros(len(job.tgt), dtype=bool)
        free[np.asarray(targets)] = True
        if not len(sources) or not free.any():
            return CandidateSet.empty()
        nb, look = job.opts.neighbours, job.opts.look
        work.mkdir(parents=True, exist_ok=True)
        texts = [job.src.texts[i].replace("\t", " ") for i in sources.tolist()]
        corpus = work / f"{self.name}.sources"
        atomic_write(corpus, "".join(f"s{i}\t{t}\n" for i, t in enumerate(texts))
                     .encode("utf-8"), "second look's sources")
        with job.timed("translate"):
            hyps, _ = cached_translations(job.model, corpus, cache_dir("translations"),
                                          job.model_pool(job.model),
                                          beam=job.opts.retrieval.translate_beam,
                                          device=job.device, progress=job.progress)
        hyp_file = work / f"{self.name}.hyps"
        atomic_write(hyp_file, "".join(f"h{i}\t{h.replace(chr(9), ' ')}\n"
                                       for i, h in enumerate(hyps)).encode("utf-8"),
                     "second look's translations")
        pool = job.pool if job.pool is not None else InlinePool()
        emb = {"hyp": work / f"emb.{nb.encoder}.hyps.npy",
               "tgt": tgt_emb or job.work / f"emb.{nb.encoder}.tgt.npy"}
        with job.timed("embed"):
            embed_corpora(nb.encoder, [(hyp_file, len(hyps), emb["hyp"]),
                                       (job.target_path, len(job.tgt), emb["tgt"], job.long_tgt)],
                          pool, progress=job.progress)
        with job.timed("knn"):
            ((sim, idx),) = knn_searches([(emb["hyp"], emb["tgt"], f"knn.{self.name}")],
                                         look.look_k, work, pool, progress=job.progress,
                                         index=nb.knn_index, device=job.device)
        src = np.repeat(sources, idx.shape[1])
        tgt, sim = np.asarray(idx).ravel(), np.asarray(sim).ravel()
        keep = (tgt >= 0) & (sim >= look.look_min_cos)
        keep[keep] &= free[tgt[keep]]
        return CandidateSet(src[keep], tgt[keep], np.full(int(keep.sum()), self.bit,
                                                          dtype=np.uint8)).union(
            CandidateSet.empty())


def _blanked(texts, skip):
    """``texts`` with the lines ``skip`` (a boolean mask, or None) marks as ``""``."""
    if skip is None or not skip.any():
        return texts
    return ["" if s else t for t, s in zip(texts, skip.tolist())]
