#!/usr/bin/env python
"""How well a recovered target segmenter reproduces a CTranslate2 model's own segmentation.

Evaluation lives here, not in the library (``triemine.models.segmentation`` only recovers).
For the shared OPUS-MT zh-en model (default) this script

1. recovers ``target.spm`` with the default estimation text (the first 2500 lines of
   ``devsets/zh-en/train.zh``) and a rank-prior-only variant (no decoding), and evaluates both and
   the greedy longest-match baseline on the first ``--eval-sentences`` BUCC zh sample sentences
   (greedy CTranslate2 float32 outputs; the transfer set is never used);
2. retrieval of known parallel pairs: for held-out ``devsets/zh-en/train`` pairs (lines 15001 on,
   never used for estimation) the true English target is segmented by every candidate segmenter;
   CTranslate2 forced decoding scores each candidate segmentation given the Chinese source. A trie
   built with a segmenter holds the target "reachably" when it contains the segmentation the model
   itself scores best (the path a constrained beam search follows); we also report the mean
   log-prob lost by the best path the trie does hold, and node counts of tries over the targets
   plus distractor lines (train.en lines 12001-14000) for longest match, 1-best and n-best.

With ``--same-script`` it measures recovery on a pair whose two sides share a script, where the
true target model is known: the small random Hugging Face de-en model of
``triemine.testing.tiny_hf_marian`` (sentencepiece models trained on the shared de-en text) is
converted to CTranslate2 float32 without its ``target.spm``, recovered from its vocabulary, source
model and outputs on German estimation text, and compared with the true ``target.spm`` on held-out
English lines (segmentations of real text, not model outputs: a random model's outputs are not
text).

``evaluate_segmenter`` and ``LongestMatch`` are importable (tests use them). Prints one JSON
object as its last line.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
import unicodedata
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))


class LongestMatch:
    """Baseline segmenter: greedy longest match over a vocabulary (what one would do without a
    target model). Text is normalised like sentencepiece (NFKC, ``▁`` for spaces)."""

    def __init__(self, vocab: Iterable[str]):
        from triemine.models.segmentation.pieces import SPECIALS
        self.vocab = {p for p in vocab if p and p not in SPECIALS}
        self.max_len = max(len(p) for p in self.vocab)

    def encode(self, text: str) -> list[str]:
        from triemine.models.segmentation.pieces import SPACE
        s = SPACE + SPACE.join(unicodedata.normalize("NFKC", text).split())
        out, i = [], 0
        while i < len(s):
            for n in range(min(self.max_len, len(s) - i), 0, -1):
                if s[i:i + n] in self.vocab:
                    break
            out.append(s[i:i + n])  # n == 1 on no match: an unknown character
            i += n
        return out


def bucc_zh_sentences() -> list[str]:
    from triemine.io.corpus import read_corpus
    from triemine.io.paths import BUCC_ZH_EN, shared_path
    return [t.strip() for t in read_corpus(shared_path(*BUCC_ZH_EN, "zh-en.sample.zh"),
                                           format="tsv").texts]


def default_evaluation_sentences(n: int = 1000) -> list[str]:
    """The first ``n`` BUCC zh sample sentences (disjoint from the estimation text)."""
    return [s for s in bucc_zh_sentences()[:n] if s]


def _spans(pieces: Sequence[str]) -> set[tuple[int, int]]:
    spans, pos = set(), 0
    for p in pieces:
        spans.add((pos, pos + len(p)))
        pos += len(p)
    return spans


def compare_segmentations(golds, preds) -> tuple[float, float]:
    """(fraction of identical sequences, fraction of gold pieces reproduced with their span)."""
    same = sum(1 for g, p in zip(golds, preds) if list(g) == list(p))
    hit = total = 0
    for g, p in zip(golds, preds):
        gs, ps = _spans(g), _spans(p)
        hit += len(gs & ps) if "".join(g) == "".join(p) else 0  # same spans, same string
        total += len(g)
    return same / max(len(golds), 1), hit / max(total, 1)


def evaluate_segmenter(ct2_dir, spm_path, sentences: Sequence[str], nbest: int = 4, *,
                       beam_size: int = 1, outputs: Sequence[Sequence[str]] | None = None,
                       progress: bool = True) -> dict:
    """Compare a target segmenter with the model's own segmentation of its outputs.

    For each source sentence the CTranslate2 model's output pieces are detokenised and segmented
    again. ``agreement_sentences``: fraction whose 1-best segmentation equals the model's pieces;
    ``agreement_pieces``: fraction of the model's pieces reproduced with the same span;
    ``coverage_at[k]``: fraction whose pieces are among the k best segmentations;
    ``longest_match_*``: the greedy longest-match baseline over the model's vocabulary.
    """
    import sentencepiece as spm

    from triemine.errors import InputError
    from triemine.models.ct2_reader import read_ct2_vocabularies
    from triemine.models.segmentation import (alignable, detokenize, model_outputs,
                                              nbest_segmentations)

    sentences = [s for s in sentences if s.strip()]
    if outputs is None:
        outputs = model_outputs(ct2_dir, sentences, beam_size=beam_size, progress=progress)
    if len(outputs) != len(sentences):
        raise ValueError("outputs and sentences differ in length")
    try:
        sp = spm.SentencePieceProcessor(model_file=str(spm_path))
    except (OSError, RuntimeError) as exc:
        raise InputError(f"cannot load sentencepiece model: {exc}", spm_path) from None
    texts = [detokenize(o) for o in outputs]
    golds = [list(o) for o in outputs]
    agree_s, agree_p = compare_segmentations(golds, sp.encode(texts, out_type=str))
    lm = LongestMatch(read_ct2_vocabularies(ct2_dir)[1])
    lm_s, lm_p = compare_segmentations(golds, [lm.encode(t) for t in texts])
    cov_at = {k: 0 for k in range(1, nbest + 1)}
    for t, g in zip(texts, golds):
        segs = nbest_segmentations(sp, t, nbest)
        for k in range(1, nbest + 1):
            cov_at[k] += g in segs[:k]
    n = max(len(golds), 1)
    return {
        "sentences": len(golds), "beam_size": beam_size, "nbest": nbest,
        "agreement_sentences": agree_s, "agreement_pieces": agree_p,
        "coverage": cov_at[nbest] / n,
        "coverage_at": {str(k): v / n for k, v in cov_at.items()},
        "longest_match_agreement_sentences": lm_s, "longest_match_agreement_pieces": lm_p,
        "outputs_with_unk": sum(1 for g in golds if "<unk>" in g),
        "outputs_not_alignable": sum(1 for g in golds if not alignable(g)),
    }


def retrieval(ct2, spm_path, n_pairs: int, n_distractors: int) -> dict:
    """Known parallel pairs (devsets/zh-en/train from line 15001) scored by forced decoding."""
    import ctranslate2
    import sentencepiece as spm
    from tqdm import tqdm

    from triemine.io.corpus import read_corpus
    from triemine.models.ct2_reader import read_ct2_vocabularies
    from triemine.models.segmentation import find_source_spm, nbest_segmentations
    from triemine.io.paths import DEVSET_ZH_EN, shared_path
    from triemine.trie import Trie

    zh = read_corpus(shared_path(*DEVSET_ZH_EN, "train.zh"), format="plain").texts
    en = read_corpus(shared_path(*DEVSET_ZH_EN, "train.en"), format="plain").texts
    start = 15000  # estimation uses the first 2500 zh lines
    pairs = [(z.strip(), e.strip()) for z, e in zip(zh[start:], en[start:])
             if z.strip() and e.strip()][:n_pairs]
    distract = [e.strip() for e in en[12000:12000 + n_distractors] if e.strip()]
    sp = spm.SentencePieceProcessor(model_file=str(spm_path))
    src_sp = spm.SentencePieceProcessor(model_file=str(find_source_spm(ct2)))
    vocab = read_ct2_vocabularies(ct2)[1]
    vid = {p: i + 4 for i, p in enumerate(vocab)}  # any injective id map; 2 = EOS in the trie
    lm = LongestMatch(vocab)

    def segs(name, text):
        if name == "longest_match":
            return [lm.encode(text)]
        return nbest_segmentations(sp, text, {"1best": 1, "nbest2": 2, "nbest4": 4}[name])

    names = ["longest_match", "1best", "nbest2", "nbest4"]
    translator = ctranslate2.Translator(str(ct2), device="cpu", compute_type="float32",
                                        intra_threads=1)
    reach = {n: 0 for n in names}
    loss = {n: [] for n in names}
    for z, e in tqdm(pairs, desc="forced decoding"):
        cands = [list(c) for c in {tuple(s) for n in names for s in segs(n, e)}]
        src = src_sp.encode(z, out_type=str)
        res = translator.score_batch([src] * len(cands), cands, max_batch_size=16)
        score = {tuple(c): float(np.sum(r.log_probs)) for c, r in zip(cands, res)}
        best = max(score.values())
        for n in names:
            mine = max(score[tuple(s)] for s in segs(n, e))
            reach[n] += mine >= best - 1e-6
            loss[n].append(best - mine)
    tries = {}
    lines = [e for _, e in pairs] + distract
    for n in names:
        seqs, lids = [], []
        for i, text in enumerate(lines):
            for s in segs(n, text):
                seqs.append([vid.get(p, 3) for p in s] + [2])
                lids.append(i)
        t = Trie.build(seqs, lids, eos=2)
        tries[n] = {"sequences": len(seqs), "nodes": int(t.n_nodes), "bytes": int(t.nbytes)}
    return {"pairs": len(pairs), "trie_lines": len(lines),
            "model_best_path_in_trie": {n: reach[n] / len(pairs) for n in names},
            "mean_logprob_lost": {n: float(np.mean(loss[n])) for n in names}, "tries": tries}


def same_script(n_est: int, n_eval: int, work: Path) -> dict:
    """Recovery on the random de-en Hugging Face test model converted to CTranslate2."""
    import shutil

    import sentencepiece as spm

    from triemine.io.corpus import read_corpus
    from triemine.models.hf_marian import import_transformers
    from triemine.testing.tiny_hf_marian import build_tiny_hf_marian
    from triemine.models.segmentation import load_model_proto, recover_target_spm
    from triemine.io.paths import PARALLEL_DE_EN, shared_path

    de, en = ([t.strip() for t in read_corpus(shared_path(*PARALLEL_DE_EN, f"train.{lang}"),
                                              format="plain").texts] for lang in ("de", "en"))
    hf = build_tiny_hf_marian(work / "hf-de-en", de[:3000], en[:3000])
    import_transformers()
    import ctranslate2
    ct2 = work / "ct2-de-en"
    ctranslate2.converters.TransformersConverter(str(hf)).convert(str(ct2), quantization="float32",
                                                                 force=True)
    shutil.copyfile(hf / "source.spm", ct2 / "source.spm")
    true_sp = spm.SentencePieceProcessor(model_file=str(hf / "target.spm"))
    true_pieces = {p.piece for p in load_model_proto(hf / "target.spm").pieces if p.type == 1}
    held = [t for t in en[10000:] if t][:n_eval]
    gold = true_sp.encode(held, out_type=str)
    lm = LongestMatch(_target_vocabulary(ct2))
    result = {"pair": "de-en (random model, 300-piece sentencepiece models)",
              "held_out_lines": len(held), "estimation_lines": n_est,
              "longest_match": dict(zip(("sentences", "pieces"), compare_segmentations(
                  gold, [lm.encode(t) for t in held])))}
    runs = {"prior_only": dict(estimation_sources=[]),
            "recovered": dict(estimation_sources=[t for t in de[3000:] if t][:n_est])}
    for name, kw in runs.items():
        out = recover_target_spm(ct2, work / f"{name}.spm", progress=False, **kw)
        pieces = {p.piece for p in load_model_proto(out).pieces if p.type == 1}
        rec = spm.SentencePieceProcessor(model_file=str(out))
        agree = compare_segmentations(gold, rec.encode(held, out_type=str))
        report = json.loads(Path(str(out) + ".json").read_text())
        result[name] = {"sentences": agree[0], "pieces": agree[1],
                        "true_pieces_found": len(true_pieces & pieces),
                        "true_pieces": len(true_pieces), "extra_pieces": len(pieces - true_pieces),
                        "prior_reference": report["prior_reference"]}
    return result


def _target_vocabulary(ct2) -> list[str]:
    from triemine.models.ct2_reader import read_ct2_vocabularies
    return read_ct2_vocabularies(ct2)[1]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--eval-sentences", type=int, default=1000)
    ap.add_argument("--pairs", type=int, default=300, help="held-out parallel pairs to retrieve")
    ap.add_argument("--distractors", type=int, default=2000, help="extra target lines in tries")
    ap.add_argument("--out", default=None, help="where to write target.spm (default: cache)")
    ap.add_argument("--same-script", action="store_true",
                    help="only the same-script measurement on the random de-en test model")
    args = ap.parse_args(argv)

    import logging

    from benchlib import machine
    from triemine.models.segmentation import recover_target_spm
    from triemine.io.paths import OPUS_MT_ZH_EN_CT2, cache_root, shared_path

    logging.basicConfig(level=logging.WARNING, format="%(name)s: %(message)s")
    logging.getLogger("triemine").setLevel(logging.INFO)
    if args.same_script:
        import tempfile
        os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
        with tempfile.TemporaryDirectory(prefix="same-script-") as work:
            result = same_script(2000, 1000, Path(work))
        result.update(machine=machine(), threads=int(os.environ.get("OMP_NUM_THREADS", "1")))
        print(json.dumps(result))
        return 0
    ct2 = shared_path(*OPUS_MT_ZH_EN_CT2)
    out = args.out or str(cache_root() / "segmenter" / "target.spm")
    t0 = time.time()
    recover_target_spm(ct2, out)
    recover_s = time.time() - t0
    prior = str(Path(out).with_name("target-prior-only.spm"))
    recover_target_spm(ct2, prior, estimation_sources=[], progress=False)
    evals = default_evaluation_sentences(args.eval_sentences)
    result = {"recover_seconds": round(recover_s, 1),
              "recovered": evaluate_segmenter(ct2, out, evals, nbest=4),
              "prior_only": evaluate_segmenter(ct2, prior, evals, nbest=4, progress=False),
              "retrieval": retrieval(ct2, out, args.pairs, args.distractors),
              "machine": machine(), "threads": int(os.environ.get("OMP_NUM_THREADS", "1"))}
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
