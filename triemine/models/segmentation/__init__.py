"""Recover the target-side sentencepiece segmentation of a CTranslate2 / OPUS-MT model.

Packaged OPUS-MT models (Argos Translate, many CTranslate2 conversions) often ship only the
source-side sentencepiece model. A trie of target sentences must hold them segmented exactly as the
model writes them, so this package rebuilds a target unigram sentencepiece model from what the
model directory holds and from the model's own outputs on source-language estimation text:

* :mod:`.prior` -- the rank prior: ``shared_vocabulary.json`` is ordered by frequency over both
  sides; on pieces only the source side uses, the source model's unigram score is
  ``log count + const``, so a monotone fit of score against log rank turns every rank into an
  estimated combined log-count. Membership of pieces both models know is read off the decoder's
  output bias (pieces the decoder never learnt to write keep a bias as low as source-only ones).
* :mod:`.outputs` -- the model's greedy outputs on estimation sentences (CTranslate2 float32,
  cached) and the counts taken from them, per piece when frequent and per class (digits,
  punctuation) where the source side dominates the ranks.
* :mod:`.refine` -- an averaged batch perceptron that nudges piece scores until Viterbi
  re-segmentation of the detokenised outputs reproduces the model's pieces.
* :mod:`.recover` -- :func:`recover_target_spm`, which runs the three and writes a real
  sentencepiece ``ModelProto`` (:mod:`.pieces`: the source model's proto with pieces and scores
  replaced, same normaliser, no byte fallback).

Evaluating a recovered model against the model's own segmentation is not part of the library:
``scripts/segmenter_eval.py`` does it (docs/segmenter.md has the numbers).
"""
from triemine.models.segmentation.outputs import model_outputs
from triemine.models.segmentation.pieces import (SPACE, alignable, detokenize, find_source_spm,
                                                 load_model_proto, nbest_ids,
                                                 nbest_segmentations)
from triemine.models.segmentation.prior import decoder_output_bias, rank_prior
from triemine.models.segmentation.recover import (RecoveryReport, default_estimation_sentences,
                                                  recover_target_spm)

__all__ = ["SPACE", "RecoveryReport", "alignable", "decoder_output_bias",
           "default_estimation_sentences", "detokenize", "find_source_spm", "load_model_proto",
           "model_outputs", "nbest_ids", "nbest_segmentations", "rank_prior",
           "recover_target_spm"]
