"""Recovering a target sentencepiece model: the prior, the output counts, the refinement."""
from __future__ import annotations

import json
import logging
import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Sequence

from triemine.io import DEVSET_ZH_EN, OPUS_MT_ZH_EN_CT2, read_corpus, shared_path
from triemine.errors import InputError
from triemine.models.ct2_reader import read_ct2_model
from triemine.models.segmentation.outputs import apply_output_counts, model_outputs
from triemine.models.segmentation.pieces import (alignable, build_proto, detokenize,
                                                 find_source_spm, load_model_proto, write_proto)
from triemine.models.segmentation.prior import decoder_output_bias, rank_prior
from triemine.models.segmentation.refine import refine_scores

logger = logging.getLogger(__name__)

DEFAULT_ESTIMATION_LINES = 2500


@dataclass
class RecoveryReport:
    """What :func:`recover_target_spm` estimated (also stored next to the model as JSON)."""
    n_pieces: int
    n_target_only: int
    n_shared_kept: int
    n_shared_dropped: int
    n_target_only_dropped: int
    prior_reference: str
    prior_reference_pieces: int
    bias_threshold: float | None
    n_output_estimates: int
    estimation_sentences: int
    perceptron_epochs: int
    train_agreement: list
    dev_agreement: list
    dev_agreement_averaged: list
    kept_iterate: int | None


def default_estimation_sentences(n: int = DEFAULT_ESTIMATION_LINES) -> list[str]:
    """Estimation text of the shared zh-en model: the first ``n`` non-empty lines of
    ``devsets/zh-en/train.zh`` (the zh-en split that excludes the transfer set; the BUCC sample,
    on which segmentation is evaluated, is not used)."""
    corpus = read_corpus(shared_path(*DEVSET_ZH_EN, "train.zh"), format="plain")
    return [t.strip() for t in corpus.texts if t.strip()][:n]


def is_default_model(ct2_dir: Path) -> bool:
    """True for the shared OPUS-MT zh-en model (whose estimation text the package knows)."""
    default = shared_path(*OPUS_MT_ZH_EN_CT2, must_exist=False)
    try:
        return Path(ct2_dir).resolve() == default.resolve()
    except OSError:
        return False


def recover_target_spm(ct2_dir: Path, output_path: Path, *,
                       estimation_sources: Sequence[str] | None = None, model=None,
                       source_spm: Path | None = None, epochs: int = 20, lr: float = 0.01,
                       min_output_count: int = 100, min_class_count: int = 5,
                       dev_fraction: float = 0.1, use_bias: bool = True, max_step: float = 0.3,
                       threads: int = 1, progress: bool = True, seed: int = 1) -> Path:
    """Write a target-side sentencepiece model for a CTranslate2 model; return ``output_path``.

    ``estimation_sources``: source-language sentences whose model outputs drive the output-count
    estimates and the perceptron. Required, except for the shared zh-en model, whose default is
    :func:`default_estimation_sentences`; pass ``[]`` for the rank prior alone (no decoding).
    Never pass the sentences you evaluate on. ``model``: the already read
    :class:`~triemine.models.ct2_reader.CT2Model` of ``ct2_dir`` (read here otherwise; it gives
    the vocabulary and the decoder's output bias). A JSON report is written to ``output_path`` +
    ``.json``. ``threads``: CTranslate2 threads for decoding the estimation sentences (outputs
    are cached under ``cache_root()/segmenter``).
    """
    ct2_dir, output_path = Path(ct2_dir), Path(output_path)
    if not ct2_dir.is_dir():
        raise InputError("CTranslate2 model directory not found", ct2_dir)
    if estimation_sources is None:
        if not is_default_model(ct2_dir):
            raise InputError("recovering a target sentencepiece model needs estimation text: "
                             "source-language sentences the model translates (a few thousand "
                             "lines; trie-mine-import --estimation-text FILE), or give the "
                             "model's own target model (--target-spm)", ct2_dir)
        estimation_sources = default_estimation_sentences()
    source_spm = Path(source_spm) if source_spm is not None else find_source_spm(ct2_dir)
    template = load_model_proto(source_spm)
    if template.trainer_spec.model_type != template.trainer_spec.UNIGRAM:
        raise InputError("source sentencepiece model is not a unigram model; cannot calibrate "
                         "a unigram target model from it", source_spm)
    if model is None:
        model = read_ct2_model(ct2_dir)
    vocab = model.target_vocabulary
    source_scores = {p.piece: p.score for p in template.pieces if p.type == p.NORMAL}
    bias = decoder_output_bias(model) if use_bias else None
    log_counts, stats = rank_prior(vocab, source_scores, bias=bias)
    logger.info("rank prior: %d target-only and %d shared pieces kept, %d shared dropped "
                "(reference: %s, %d pieces; bias threshold %s)", stats["target_only"],
                stats["shared_kept"], stats["shared_dropped"], stats["reference"],
                stats["reference_pieces"], stats["bias_threshold"])

    estimation_sources = [s.strip() for s in estimation_sources if s.strip()]
    outputs = model_outputs(ct2_dir, estimation_sources, progress=progress, threads=threads,
                            source_spm=source_spm) if estimation_sources else []
    n_out_est = apply_output_counts(log_counts, source_scores, outputs, set(vocab),
                                    min_output_count, min_class_count)
    norm = math.log(sum(math.exp(v) for v in log_counts.values()))
    scores = {p: v - norm for p, v in log_counts.items()}

    pairs = [(detokenize(o), list(o)) for o in outputs if alignable(o)]
    scores, hist = refine_scores(template, scores, pairs, source_scores, epochs=epochs, lr=lr,
                                 max_step=max_step, dev_fraction=dev_fraction, seed=seed,
                                 progress=progress)

    write_proto(build_proto(template, scores, description=f"target side of {ct2_dir.name}"),
                output_path)
    report = RecoveryReport(
        n_pieces=len(scores), n_target_only=stats["target_only"],
        n_shared_kept=stats["shared_kept"], n_shared_dropped=stats["shared_dropped"],
        n_target_only_dropped=stats["target_only_dropped"], prior_reference=stats["reference"],
        prior_reference_pieces=stats["reference_pieces"], bias_threshold=stats["bias_threshold"],
        n_output_estimates=n_out_est, estimation_sentences=len(estimation_sources),
        perceptron_epochs=len(hist.train_agreement), train_agreement=hist.train_agreement,
        dev_agreement=hist.dev_agreement, dev_agreement_averaged=hist.dev_agreement_averaged,
        kept_iterate=hist.kept_iterate)
    Path(str(output_path) + ".json").write_text(json.dumps(asdict(report), indent=1))
    return output_path
