"""The mining job's last stage, a block of candidates at a time: the derived features, the
combined score and the TSV's rows.

    scored candidates (every generator's features, exact scores, priors)
      -> OUT.tsv.work/candidates.cols/ (:mod:`triemine.mining.columns`), marked ``scored``
      -> per block of FINISH_BLOCK rows, read back by plain reads (:meth:`ColumnStore.block`):
         the block's texts read once from the corpora (memory-mapped), the derived features
         (:func:`triemine.mining.features.derived`), ``combined``, the TSV's rows

So while it finishes, the driver holds one block's columns, texts and formatted rows, whatever
the number of candidates (about 5 × 10^8 at 10^8 sources: 40 GB of columns), and every text is
read once per candidate where the derived features and the TSV writer read it three times.  The
bytes of the TSV do not depend on the block size.  A job that has scored its candidates resumes
from them (:func:`load_scored`) without opening the earlier stages' files.
"""
from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Callable, Dict, Optional, Set, Tuple

import numpy as np

from triemine.judging.mined import curve_columns, judge_columns
from triemine.judging.features import TEXT_COLUMNS
from triemine.judging.model import check_reads, judge_path, load_judge
from triemine.judging.prior import estimate_prior
from triemine.judging.shipped import judge_record, learned, zsum_judge
from triemine.mining.candidates import CandidateSet
from triemine.mining.columns import ColumnStore, write_set
from triemine.mining.features import derived
from triemine.mining.stages import stage_dir
from triemine.io import column_order, write_row_blocks

# candidates per block: the driver holds one block's columns, texts and formatted rows (tens of
# MB), not every candidate's (hundreds of GB at 10^8 sources)
FINISH_BLOCK = 65536
CANDIDATES = "candidates"  # the job's store: every generator's candidates, united, then scored
SCORED = "scored"          # the stage after which the store holds every column the TSV needs


def save_scored(work: Path, cands: CandidateSet) -> ColumnStore:
    """``cands`` as the job's scored store (for a caller that holds them whole)."""
    return write_set(stage_dir(work, CANDIDATES), cands, done=(CANDIDATES, SCORED))


def load_scored(work: Path) -> Optional[ColumnStore]:
    """The job's store when it is scored (complete and whole), else ``None``."""
    store = ColumnStore.open(stage_dir(work, CANDIDATES))
    return store if store is not None and SCORED in store.done else None


def block_columns(scored: ColumnStore, src, tgt, combination, a: int, b: int,
                  judge: Optional[Callable] = None) -> dict:
    """Candidates ``[a, b)`` of ``scored`` as the TSV writes them: their columns, derived
    features (:func:`~triemine.mining.features.derived`), ``combined`` (``combination``) and,
    with ``judge``, ``judge(columns, src_texts, tgt_texts)``'s columns; ``origin`` (the
    generators' bitmask), the ids and the texts."""
    part = scored.block(a, b)
    s, t = part.src.tolist(), part.tgt.tolist()
    src_texts, tgt_texts = [src.texts[i] for i in s], [tgt.texts[i] for i in t]
    local = np.arange(len(part), dtype=np.int64)  # the block's pairs index its text lists
    part = derived(CandidateSet(local, local, part.origin, part.columns), tgt_texts, src_texts)
    part = part.with_columns(combined=combination(part.columns))
    if judge is not None:
        part = part.with_columns(**judge(part.columns, src_texts, tgt_texts))
    return dict(part.columns, origin=part.origin.astype(np.float64),
                src_id=[src.ids[i] for i in s], tgt_id=[tgt.ids[i] for i in t],
                src=src_texts, tgt=tgt_texts)


def column_of(scored: ColumnStore, src, tgt, combination, judge: Callable, name: str,
              block: Optional[int] = None) -> np.ndarray:
    """Column ``name`` of every candidate as :func:`block_columns` computes it with ``judge``,
    a block at a time (a first pass over the candidates, for a statistic the TSV's values
    need, e.g. the judge's estimated share of translations)."""
    block = block or FINISH_BLOCK
    parts = [np.asarray(block_columns(scored, src, tgt, combination, a,
                                      min(a + block, len(scored)), judge)[name])
             for a in range(0, len(scored), block)]
    return np.concatenate(parts) if parts else np.zeros(0)


def finish_tsv(out_path: Path, scored: ColumnStore, src, tgt,
               combination: Callable[[Dict[str, np.ndarray]], np.ndarray], meta: dict,
               block: Optional[int] = None, judge: Optional[Callable] = None) -> np.ndarray:
    """The mining TSV of the scored candidates (one row per pair; :mod:`triemine.io.tsv`), written
    atomically, ``block`` candidates at a time (default ``FINISH_BLOCK``): each block's
    :func:`block_columns` computed from its texts, read once (``judge``: the columns
    :mod:`triemine.judging.mined` adds, ``prob`` and the judge's).  Returns how many candidates
    have each origin bitmask (256 counts, for the summary's; it kept every candidate's bitmask,
    a byte each)."""
    block = block or FINISH_BLOCK
    histogram = np.zeros(256, dtype=np.int64)

    def finished(a: int, b: int) -> dict:
        cols = block_columns(scored, src, tgt, combination, a, b, judge)
        histogram[:] += np.bincount(cols["origin"].astype(np.int64), minlength=256)
        return cols
    first = finished(0, min(block, len(scored)))  # also names the columns of an empty set
    columns = column_order(c for c in first if c not in ("n_tokens", "n_tokens_rev")
                           and c not in ("src_id", "tgt_id", "src", "tgt"))

    def blocks():
        yield first
        for a in range(block, len(scored), block):
            yield finished(a, min(a + block, len(scored)))
    write_row_blocks(out_path, columns, blocks(), meta=meta)
    return histogram


def judge_adder(opts, scored: ColumnStore, src, tgt, comb, density: Optional[float] = None
                ) -> Tuple[Optional[Callable], Optional[float], Optional[dict]]:
    """The columns the job adds after ``combined`` (:mod:`triemine.judging.mined`), the
    share of translations ``prob`` is shifted to and the judge's entry of the run record
    (``fingerprint``, resolved ``path``): the judge's ``judge`` and ``prob`` when the job's
    configuration has a learned judge (``--judge`` another), at ``--density`` or else the share
    estimated from the candidates (:func:`triemine.judging.prior.estimate_prior` over a first
    pass, :func:`column_of`); ``density``, when given, over both (the second look's pass keeps
    the first pass's share); else, when its judge is a fixed combination (``zsum``) and the
    job's combination ``comb`` is the judge's, ``prob`` by the judge's curve (None without
    one) and the judge's entry; else ``(None, None, None)`` (a custom ``--combination``: no
    judge of the configuration cut it)."""
    if learned(opts.config):
        judge = load_judge(opts.scores.judge)
        density = density if density is not None else opts.scores.density
        if density is None:
            density = estimate_prior(column_of(scored, src, tgt, comb, judge_columns(judge),
                                               "judge"), judge.train_prior)
        record = {"fingerprint": judge.fingerprint(), "path": judge_path(opts.scores.judge)}
        return judge_columns(judge, density), float(density), record
    z = zsum_judge(opts.config)
    if z is not None and asdict(comb) == asdict(z.combination):
        adder = curve_columns(z.curve) if z.curve is not None else None
        return adder, None, judge_record(opts.config)
    return None, None, None


def check_judge(opts, have: Set[str]) -> None:
    """Before any stage runs: the judge of the job's configuration (``--judge`` another), its
    file read and checked, and refused when it reads a column not in ``have`` (the columns of
    the stages before the TSV), the text features (:data:`TEXT_COLUMNS`) or ``combined``; an
    :class:`~triemine.errors.InputError` naming the file.  Nothing without a judge."""
    if not learned(opts.config):
        return
    judge = load_judge(opts.scores.judge)
    check_reads(judge, set(have) | set(TEXT_COLUMNS) | {"combined"},
                judge_path(opts.scores.judge),
                f"--config {opts.config} with --candidates {','.join(opts.candidates)} and "
                f"--encoder {opts.neighbours.encoder}")
