"""Recover the target-side sentencepiece segmentation of a CTranslate2 / OPUS-MT model.

Packaged OPUS-MT models (Argos Translate, many CTranslate2 conversions) often ship only the
source-side sentencepiece model.  A trie of target sentences must hold them segmented exactly as the
model writes them, so this module rebuilds a target unigram sentencepiece model from what exists:

1. **Rank prior.**  ``shared_vocabulary.json`` lists pieces of *both* sides ordered by their
   frequency in the segmented training data.  On pieces that only the source side uses (those
   containing Han characters) the source model's unigram score is ``log count_src + const``, so a
   monotone fit of source score against log rank turns any rank into an estimated combined
   log-count.  Target-only pieces (absent from the source model) get that count; pieces both models
   know get the combined count minus the source model's share.
2. **Membership from the decoder's output bias.**  Whether a shared piece is a target piece at all
   is read off the decoder projection bias: pieces the decoder never learnt to write keep a bias
   as low as the source-only pieces (frequent pieces excepted, where the subtraction decides).
3. **Model-output counts.**  Frequent punctuation, ``▁`` and digits are dominated by Chinese-side
   counts, so their share cannot be recovered from ranks.  The model's own greedy outputs on
   estimation sentences give direct counts, per piece when frequent and per class (digits by
   length, punctuation) otherwise.
4. **Discriminative correction.**  An averaged structured perceptron nudges piece scores so that
   Viterbi re-segmentation of the detokenised estimation outputs reproduces the model's pieces;
   the iterate kept is chosen on held-out estimation outputs.

The result is written as a real sentencepiece ``ModelProto`` (the source model's proto with pieces,
scores and trainer fields replaced; same ``nmt_nfkc`` normaliser, no byte fallback, so characters
outside the vocabulary encode to ``<unk>`` id 0).  Anything taking a ``--target-spm`` path accepts
it like the model's real target sentencepiece model.
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np

from triemine.errors import InputError
from triemine.paths import BUCC_ZH_EN, DEVSET_ZH_EN, cache_root, shared_path

SPACE = "\u2581"
UNK, BOS, EOS = "<unk>", "<s>", "</s>"

# ---------------------------------------------------------------------------------------------
# Reading a CTranslate2 directory
# ---------------------------------------------------------------------------------------------


def _read_vocabulary_file(path: Path) -> list[str]:
    if path.suffix == ".json":
        try:
            with open(path, encoding="utf-8") as f:
                vocab = json.load(f)
        except (OSError, ValueError) as exc:
            raise InputError(f"cannot read vocabulary: {exc}", path) from None
        if not isinstance(vocab, list) or not all(isinstance(v, str) for v in vocab):
            raise InputError("vocabulary JSON must be a list of strings", path)
        return vocab
    with open(path, encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f]


def read_target_vocabulary(ct2_dir: Path) -> list[str]:
    """The decoder's vocabulary of a CTranslate2 model directory, in id order."""
    ct2_dir = Path(ct2_dir)
    for name in ("target_vocabulary.json", "shared_vocabulary.json",
                 "target_vocabulary.txt", "shared_vocabulary.txt"):
        if (ct2_dir / name).is_file():
            vocab = _read_vocabulary_file(ct2_dir / name)
            if len(set(vocab)) != len(vocab):
                raise InputError("vocabulary has duplicate entries", ct2_dir / name)
            return vocab
    raise InputError("no target_vocabulary.{json,txt} or shared_vocabulary.{json,txt}", ct2_dir)


def find_source_spm(ct2_dir: Path) -> Path:
    """The source-side sentencepiece model shipped with a CTranslate2 model directory."""
    ct2_dir = Path(ct2_dir)
    for name in ("source.spm", "sentencepiece.model", "source.model", "spm.model"):
        if (ct2_dir / name).is_file():
            return ct2_dir / name
    raise InputError("no source sentencepiece model (source.spm, sentencepiece.model, "
                     "source.model or spm.model)", ct2_dir)


def load_model_proto(path: Path):
    from sentencepiece import sentencepiece_model_pb2 as pb
    proto = pb.ModelProto()
    try:
        proto.ParseFromString(Path(path).read_bytes())
    except Exception as exc:  # protobuf's DecodeError and friends
        raise InputError(f"not a sentencepiece model: {exc}", path) from None
    if not proto.pieces:
        raise InputError("not a sentencepiece model (no pieces)", path)
    return proto


def _model_fingerprint(ct2_dir: Path) -> str:
    h = hashlib.sha1()
    for name in sorted(os.listdir(ct2_dir)):
        p = Path(ct2_dir) / name
        if p.is_file():
            st = p.stat()
            h.update(f"{name}:{st.st_size}".encode())
            with open(p, "rb") as f:
                h.update(f.read(1 << 16))
    return h.hexdigest()[:16]


# ---------------------------------------------------------------------------------------------
# The model's own outputs (ground truth for "how the model segments")
# ---------------------------------------------------------------------------------------------


def model_outputs(ct2_dir: Path, sentences: Sequence[str], *, beam_size: int = 1,
                  batch_size: int = 32, threads: int = 1, cache: bool = True,
                  progress: bool = True, source_spm: Path | None = None) -> list[list[str]]:
    """Target piece sequences the CTranslate2 model writes for ``sentences`` (cached on disk)."""
    import sentencepiece as spm

    ct2_dir = Path(ct2_dir)
    source_spm = Path(source_spm) if source_spm is not None else find_source_spm(ct2_dir)
    key = hashlib.sha1(json.dumps([_model_fingerprint(ct2_dir), str(source_spm.name), beam_size,
                                   "greedy-256"]).encode()).hexdigest()[:20]
    # One cache file per model and beam size: {source sentence: target pieces}.
    cache_file = cache_root() / "segmenter" / f"outputs-{key}.json"
    known = _load_output_cache(cache_file) if cache else {}
    missing = sorted({s for s in sentences if s not in known}, key=len)
    if missing:
        import ctranslate2
        from tqdm import tqdm

        sp = spm.SentencePieceProcessor(model_file=str(source_spm))
        translator = ctranslate2.Translator(str(ct2_dir), device="cpu", compute_type="int8",
                                            intra_threads=threads)
        new: dict[str, list[str]] = {}
        # Sorted by length so batches waste little padding.
        with tqdm(total=len(missing), desc=f"ct2 beam={beam_size}", unit="sent",
                  disable=not progress) as bar:
            for start in range(0, len(missing), batch_size):
                batch = missing[start:start + batch_size]
                res = translator.translate_batch([sp.encode(s, out_type=str) for s in batch],
                                                 beam_size=beam_size, max_batch_size=batch_size,
                                                 max_decoding_length=256)
                for s, r in zip(batch, res):
                    new[s] = list(r.hypotheses[0])
                bar.update(len(batch))
        known.update(new)
        if cache:
            merged = _load_output_cache(cache_file)  # another process may have added some
            merged.update(new)
            cache_file.parent.mkdir(parents=True, exist_ok=True)
            tmp = cache_file.with_name(f"{cache_file.name}.{os.getpid()}.tmp")
            with open(tmp, "w", encoding="utf-8") as f:
                json.dump(merged, f, ensure_ascii=False)
            os.replace(tmp, cache_file)
    return [known[s] for s in sentences]


def _load_output_cache(path: Path) -> dict[str, list[str]]:
    if not path.is_file():
        return {}
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError):
        return {}  # a damaged cache is recomputed
    return data if isinstance(data, dict) else {}


def detokenize(pieces: Sequence[str]) -> str:
    """Text of a target piece sequence, as sentencepiece's decoder writes it."""
    return "".join(pieces).replace(SPACE, " ").strip(" ")


# ---------------------------------------------------------------------------------------------
# Default data splits (documented in docs/segmenter.md)
# ---------------------------------------------------------------------------------------------


def _read_text_lines(path: Path, tsv: bool) -> list[str]:
    out = []
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if tsv:
                if "\t" not in line:
                    raise InputError("expected id<TAB>sentence", path, lineno)
                line = line.split("\t", 1)[1]
            out.append(line.strip())
    return out


def bucc_zh_sentences() -> list[str]:
    return _read_text_lines(shared_path(*BUCC_ZH_EN, "zh-en.sample.zh"), tsv=True)


def default_estimation_sentences(n_parallel: int = 1500, n_bucc: int = 1000) -> list[str]:
    """Estimation data: the first ``n_parallel`` lines of ``devsets/zh-en/train.zh`` (the zh-en
    split that excludes the transfer set) plus the *last* ``n_bucc`` BUCC zh sample sentences
    (evaluation uses the first 1000)."""
    par = _read_text_lines(shared_path(*DEVSET_ZH_EN, "train.zh"), tsv=False)[:n_parallel]
    bucc = bucc_zh_sentences()
    bucc_part = bucc[len(bucc) - n_bucc:] if n_bucc else []
    return [s for s in par + bucc_part if s]


def default_evaluation_sentences(n: int = 1000) -> list[str]:
    """Evaluation data: the first ``n`` BUCC zh sample sentences (disjoint from estimation)."""
    return [s for s in bucc_zh_sentences()[:n] if s]


# ---------------------------------------------------------------------------------------------
# Recovery
# ---------------------------------------------------------------------------------------------

_HAN = re.compile(r"[\u2e80-\u2fdf\u3005-\u3007\u3021-\u3029\u3400-\u4dbf\u4e00-\u9fff"
                  r"\uf900-\ufaff\U00020000-\U0003134f]")


@dataclass
class RecoveryReport:
    """What :func:`recover_target_spm` estimated (also stored next to the model as JSON)."""
    n_pieces: int
    n_target_only: int
    n_shared_kept: int
    n_shared_dropped: int
    n_target_only_dropped: int
    bias_threshold: float | None
    n_output_estimates: int
    estimation_sentences: int
    perceptron_epochs: int
    train_agreement: list
    dev_agreement: list
    dev_agreement_averaged: list
    kept_iterate: int | None


def _monotone_rank_fit(log_rank: np.ndarray, score: np.ndarray, bin_width: float = 0.25):
    """Median source score per log-rank bin, made non-increasing, linearly interpolated."""
    edges = np.arange(0.0, log_rank.max() + bin_width, bin_width)
    xs, ys = [], []
    for lo in edges:
        sel = (log_rank >= lo) & (log_rank < lo + bin_width)
        if sel.sum() >= 3:
            xs.append(float(np.median(log_rank[sel])))
            ys.append(float(np.median(score[sel])))
    if len(xs) < 2:
        raise InputError("too few source-only pieces to calibrate the rank prior")
    ys = np.minimum.accumulate(np.array(ys))
    xs = np.array(xs)
    slope_hi = (ys[-1] - ys[-2]) / max(xs[-1] - xs[-2], 1e-6)
    slope_lo = (ys[1] - ys[0]) / max(xs[1] - xs[0], 1e-6)

    def fit(x: np.ndarray) -> np.ndarray:
        y = np.interp(x, xs, ys)
        y = np.where(x > xs[-1], ys[-1] + slope_hi * (x - xs[-1]), y)
        return np.where(x < xs[0], ys[0] + slope_lo * (x - xs[0]), y)

    return fit


def rank_prior(vocab: Sequence[str], source_scores: dict[str, float],
               keep_ratio: float = 0.25, bias: np.ndarray | None = None,
               drop_target_only: bool = True, keep_floor: float = 0.05,
               min_bias_rank: int = 2000) -> tuple[dict[str, float], dict]:
    """Log-count estimates (natural log, source-model units) of the target side from ranks.

    Returns ``{piece: log_count}`` for pieces judged to belong to the target model, plus counts
    for the report.  Without ``bias``, a piece the source model knows is kept when the target
    share of its estimated combined count is at least ``keep_ratio``.  With the decoder's output
    bias (one value per vocabulary entry), membership of shared pieces ranked ``min_bias_rank``
    or later is decided by the bias instead: pieces the decoder was never trained to write end
    with a bias as low as source-only (Han) pieces; the threshold is the midpoint between the 90th
    percentile of source-only pieces and the 10th percentile of pieces absent from the source
    model.  ``drop_target_only`` also drops low-bias pieces absent from the source model.
    """
    log_rank = np.log(np.arange(len(vocab), dtype=np.float64) + 1.0)
    ref = [i for i, p in enumerate(vocab) if p in source_scores and _HAN.search(p)]
    fit = _monotone_rank_fit(log_rank[ref], np.array([source_scores[vocab[i]] for i in ref]))
    total = fit(log_rank)
    out: dict[str, float] = {}
    stats = {"target_only": 0, "shared_kept": 0, "shared_dropped": 0, "target_only_dropped": 0,
             "bias_threshold": None}
    threshold = None
    if bias is not None:
        if len(bias) != len(vocab):
            raise InputError(f"decoder output bias has {len(bias)} entries for a vocabulary of "
                             f"{len(vocab)}")
        tgt_only = [i for i, p in enumerate(vocab) if p and p not in source_scores]
        threshold = float(np.percentile(bias[ref], 90) + np.percentile(bias[tgt_only], 10)) / 2
        stats["bias_threshold"] = threshold
    for i, piece in enumerate(vocab):
        if not piece or piece in (UNK, BOS, EOS, "<pad>"):
            continue
        single = len(piece) == 1  # every character stays encodable
        # The bias is no membership signal for frequent pieces (sentence-initial "▁It", "▁Let",
        # "▁Well" have biases as low as source-only pieces): below min_bias_rank ranks decide.
        writable = threshold is None or bias[i] >= threshold or i < min_bias_rank
        if piece not in source_scores:
            if writable or single or not drop_target_only:
                out[piece] = float(total[i])
                stats["target_only"] += 1
            else:
                stats["target_only_dropped"] += 1
            continue
        tot = math.exp(total[i])
        tgt = tot - math.exp(source_scores[piece])
        if threshold is None or i < min_bias_rank:
            keep = tgt >= keep_ratio * tot or single
        else:
            keep = writable or single
        if keep:
            out[piece] = math.log(max(tgt, (keep_floor if writable and threshold is not None
                                            else 0.05) * tot))
            stats["shared_kept"] += 1
        else:
            stats["shared_dropped"] += 1
    return out, stats


def decoder_output_bias(ct2_dir: Path) -> np.ndarray | None:
    """The decoder's output-projection bias of a CTranslate2 transformer (None if it has none)."""
    from triemine.models.ct2_reader import read_ct2_model

    model = read_ct2_model(ct2_dir)
    for name in ("decoder/projection/bias",):
        if model.has(name):
            return np.asarray(model.get(name), dtype=np.float64).reshape(-1)
    return None


def _dominated_class(piece: str):
    """Class of a piece whose counts the Chinese side dominates (None for other pieces)."""
    body = piece[1:] if piece.startswith(SPACE) else piece
    head = piece.startswith(SPACE)
    if not body:
        return None
    if body.isdigit():
        return ("digits", head, min(len(body), 4))
    if not any(c.isalnum() for c in body) and not _HAN.search(body):
        return ("punct", head, min(len(body), 2))
    return None


def _piece_features(pieces: Sequence[str], source_scores: dict[str, float]) -> np.ndarray:
    """Piece classes whose scores the perceptron corrects as a group (0/1 matrix)."""
    cols = [
        lambda p: p in source_scores,                                   # shared with the source
        lambda p: p == SPACE,                                           # bare word boundary
        lambda p: p.startswith(SPACE) and len(p) > 1,                   # word-initial piece
        lambda p: p.lstrip(SPACE).isdigit(),                            # digits
        lambda p: p.lstrip(SPACE)[:1].isupper(),                        # capitalised
        lambda p: len(p.lstrip(SPACE)) == 1,                            # single character
        lambda p: len(p.lstrip(SPACE)) == 2,
        lambda p: len(p.lstrip(SPACE)) == 3,
        lambda p: len(p.lstrip(SPACE)) >= 6,
        lambda p: bool(_HAN.search(p)),                                 # Han characters
        lambda p: not any(c.isalnum() for c in p),                      # punctuation / symbols
    ]
    return np.array([[1.0 if f(p) else 0.0 for f in cols] for p in pieces])


def _alignable(pieces: Sequence[str]) -> bool:
    """Pieces a unigram model could reproduce from their detokenised text."""
    if not pieces or any(p in (UNK, BOS, EOS) or not p for p in pieces):
        return False
    joined = "".join(pieces)
    if not joined.startswith(SPACE) or (SPACE + SPACE) in joined or joined.endswith(SPACE):
        return False
    return unicodedata.normalize("NFKC", joined) == joined


def build_proto(template, scores: dict[str, float], *, description: str = ""):
    """A unigram ``ModelProto``: the template's normaliser and specials, ``scores``' pieces."""
    from sentencepiece import sentencepiece_model_pb2 as pb

    proto = pb.ModelProto()
    proto.CopyFrom(template)
    del proto.pieces[:]
    specials = {p.piece: p for p in template.pieces if p.type != pb.ModelProto.SentencePiece.NORMAL}
    for name, kind in ((UNK, pb.ModelProto.SentencePiece.UNKNOWN),
                       (BOS, pb.ModelProto.SentencePiece.CONTROL),
                       (EOS, pb.ModelProto.SentencePiece.CONTROL)):
        sp = proto.pieces.add()
        sp.piece, sp.score, sp.type = name, 0.0, kind
    del specials
    for piece, score in sorted(scores.items(), key=lambda kv: (-kv[1], kv[0])):
        sp = proto.pieces.add()
        sp.piece, sp.score, sp.type = piece, float(score), pb.ModelProto.SentencePiece.NORMAL
    ts = proto.trainer_spec
    ts.model_type = pb.TrainerSpec.UNIGRAM
    ts.vocab_size = len(proto.pieces)
    ts.byte_fallback = False
    ts.unk_id, ts.bos_id, ts.eos_id, ts.pad_id = 0, 1, 2, -1
    ts.unk_piece, ts.bos_piece, ts.eos_piece = UNK, BOS, EOS
    del ts.input[:]
    ts.input.append("recovered-by-triemine")
    ts.model_prefix = description or "triemine-recovered-target"
    return proto


def _processor(proto):
    import sentencepiece as spm
    return spm.SentencePieceProcessor(model_proto=proto.SerializeToString())


def _agreement(sp, texts: Sequence[str], golds: Sequence[Sequence[str]]) -> tuple[float, list]:
    pred = sp.encode(list(texts), out_type=str)
    wrong = [(g, p) for g, p in zip(golds, pred) if list(g) != p]
    return 1.0 - len(wrong) / max(len(golds), 1), wrong


def recover_target_spm(ct2_dir: Path, output_path: Path, *, estimation_sources=None,
                       source_spm: Path | None = None, epochs: int = 20, lr: float = 0.01,
                       min_output_count: int = 100, min_class_count: int = 5,
                       dev_fraction: float = 0.1, use_bias: bool = True, max_step: float = 0.3,
                       threads: int = 1,
                       progress: bool = True, seed: int = 1) -> Path:
    """Write a target-side sentencepiece model for a CTranslate2 model; return ``output_path``.

    ``estimation_sources``: source-language sentences whose model outputs drive the output-count
    estimates and the perceptron (default :func:`default_estimation_sentences`); pass ``[]`` for
    the rank prior alone.  Never pass the sentences you evaluate on.  A JSON report is written to
    ``output_path`` + ``.json``.  ``threads``: CTranslate2 threads for decoding the estimation
    sentences (outputs are cached under ``cache_root()/segmenter``).
    """
    ct2_dir, output_path = Path(ct2_dir), Path(output_path)
    if not ct2_dir.is_dir():
        raise InputError("CTranslate2 model directory not found", ct2_dir)
    source_spm = Path(source_spm) if source_spm is not None else find_source_spm(ct2_dir)
    template = load_model_proto(source_spm)
    if template.trainer_spec.model_type != template.trainer_spec.UNIGRAM:
        raise InputError("source sentencepiece model is not a unigram model; cannot calibrate "
                         "a unigram target model from it", source_spm)
    vocab = read_target_vocabulary(ct2_dir)
    source_scores = {p.piece: p.score for p in template.pieces if p.type == p.NORMAL}
    bias = decoder_output_bias(ct2_dir) if use_bias else None
    log_counts, stats = rank_prior(vocab, source_scores, bias=bias)

    if estimation_sources is None:
        estimation_sources = default_estimation_sentences()
    estimation_sources = [s for s in estimation_sources if s.strip()]
    outputs = model_outputs(ct2_dir, estimation_sources, progress=progress, threads=threads,
                            source_spm=source_spm) if estimation_sources else []
    vocab_set = set(vocab)

    # 2. model-output counts: pieces the model writes are target pieces; frequent ones get a
    # count-based estimate on the prior's scale (offset fitted on target-only pieces).
    counts: dict[str, int] = {}
    for out in outputs:
        for p in out:
            if p in vocab_set and p not in (UNK, BOS, EOS):
                counts[p] = counts.get(p, 0) + 1
    n_out_est = 0
    if counts:
        n_tok = sum(counts.values())
        diffs = [log_counts[p] - math.log(c / n_tok) for p, c in counts.items()
                 if c >= min_output_count and p not in source_scores and p in log_counts]
        offset = float(np.median(diffs)) if diffs else 0.0
        # Classes the source side dominates (digits by length, punctuation): the target share of
        # each shared piece is its source probability times the class's output/source mass ratio.
        class_src: dict[tuple, float] = {}
        class_out: dict[tuple, int] = {}
        for p, sc in source_scores.items():
            k = _dominated_class(p)
            if k is not None and p in log_counts:
                class_src[k] = class_src.get(k, 0.0) + math.exp(sc)
        for p, c in counts.items():
            k = _dominated_class(p)
            if k is not None and p in source_scores:
                class_out[k] = class_out.get(k, 0) + c
        for p, sc in source_scores.items():
            k = _dominated_class(p)
            if k is not None and p in log_counts and class_out.get(k, 0) >= min_class_count:
                log_counts[p] = sc + math.log(class_out[k] / n_tok / class_src[k]) + offset
                n_out_est += 1
        for p, c in counts.items():
            if p not in log_counts or (p in source_scores and c >= min_output_count):
                # a piece the rank prior dropped although the model writes it, or a frequent one
                log_counts[p] = math.log(c / n_tok) + offset
                n_out_est += 1

    norm = math.log(sum(math.exp(v) for v in log_counts.values()))
    scores = {p: v - norm for p, v in log_counts.items()}

    # 3. averaged batch perceptron on the alignable estimation outputs.  Besides one weight per
    # piece it learns weights of piece classes (see _piece_features), which carry corrections
    # over to pieces that never occur in the estimation outputs.
    pairs = [(detokenize(o), o) for o in outputs if _alignable(o)]
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(pairs))
    n_dev = int(len(pairs) * dev_fraction) if len(pairs) >= 50 else 0
    dev = [pairs[i] for i in order[:n_dev]]
    train = [pairs[i] for i in order[n_dev:]]
    train_hist, dev_hist, avg_hist, kept = [], [], [], None
    if train and epochs > 0:
        from tqdm import tqdm
        pieces = list(scores)
        index = {p: i for i, p in enumerate(pieces)}
        base = np.array([scores[p] for p in pieces])
        feats = _piece_features(pieces, source_scores)
        w = np.zeros_like(base)
        theta = np.zeros(feats.shape[1])
        w_sum, theta_sum, n_sum = np.zeros_like(w), np.zeros_like(theta), 0
        best = (-1.0, None)
        steps, prev_sign = np.full_like(w, 0.1), np.zeros_like(w)
        tt, tg = [t for t, _ in train], [g for _, g in train]
        for epoch in tqdm(range(epochs), desc="perceptron", disable=not progress):
            cur = base + w + feats @ theta
            sp = _processor(build_proto(template, dict(zip(pieces, cur))))
            acc, wrong = _agreement(sp, tt, tg)
            train_hist.append(acc)
            if dev:
                dev_hist.append(_agreement(sp, [t for t, _ in dev], [g for _, g in dev])[0])
            if not wrong:
                break
            delta = np.zeros_like(w)
            for gold, pred in wrong:
                for p in gold:
                    delta[index[p]] += 1.0
                for p in pred:
                    j = index.get(p)
                    if j is not None:
                        delta[j] -= 1.0
            # Rprop-style per-piece steps: grow while a piece keeps being pushed the same way,
            # halve when the push reverses (batch updates otherwise overshoot and oscillate).
            sign = np.sign(delta)
            same = sign * prev_sign
            steps = np.where(same > 0, np.minimum(steps * 1.2, max_step),
                             np.where(same < 0, steps * 0.5, steps))
            w += sign * steps
            prev_sign = np.where(same < 0, 0.0, sign)
            theta += lr / (1.0 + epoch / 10.0) * (feats.T @ delta) / max(len(wrong), 1)
            w_sum += w
            theta_sum += theta
            n_sum += 1
            # keep the averaged iterate that does best on the held-out part of the estimation data
            avg = base + (w_sum + feats @ theta_sum) / n_sum
            score_avg = _agreement(_processor(build_proto(template, dict(zip(pieces, avg)))),
                                   [t for t, _ in dev or train], [g for _, g in dev or train])[0]
            avg_hist.append(score_avg)
            if score_avg > best[0]:
                best = (score_avg, avg)
                best_epoch = epoch
        if best[1] is not None and best[0] > (dev_hist or train_hist)[0]:
            scores = dict(zip(pieces, best[1]))
            kept = best_epoch

    proto = build_proto(template, scores, description=f"target side of {ct2_dir.name}")
    output_path.parent.mkdir(parents=True, exist_ok=True)
    tmp = output_path.with_name(output_path.name + ".tmp")
    tmp.write_bytes(proto.SerializeToString())
    os.replace(tmp, output_path)
    report = RecoveryReport(
        n_pieces=len(scores), n_target_only=stats["target_only"],
        n_shared_kept=stats["shared_kept"], n_shared_dropped=stats["shared_dropped"],
        n_target_only_dropped=stats["target_only_dropped"], bias_threshold=stats["bias_threshold"],
        n_output_estimates=n_out_est, estimation_sentences=len(estimation_sources),
        perceptron_epochs=len(train_hist), train_agreement=train_hist, dev_agreement=dev_hist,
        dev_agreement_averaged=avg_hist, kept_iterate=kept)
    Path(str(output_path) + ".json").write_text(json.dumps(report.__dict__, indent=1))
    return output_path


# ---------------------------------------------------------------------------------------------
# Segmenting with the recovered model; evaluation
# ---------------------------------------------------------------------------------------------


def _distinct_nbest(sp, text: str, k: int, as_ids: bool) -> list[list]:
    """Up to ``k`` distinct segmentations of ``text`` (pieces or ids), best first."""
    if k <= 1:
        return [sp.encode(text, out_type=int if as_ids else str)]
    nbest = sp.nbest_encode_as_ids if as_ids else sp.nbest_encode_as_pieces
    seen, out = set(), []
    for seg in nbest(text, k):
        key = tuple(seg)
        if key not in seen:
            seen.add(key)
            out.append(list(seg))
    return out


def nbest_segmentations(sp, text: str, k: int) -> list[list[str]]:
    """Up to ``k`` distinct segmentations of ``text``, best first (``k=1``: Viterbi)."""
    return _distinct_nbest(sp, text, k, as_ids=False)


def nbest_ids(sp, text: str, k: int) -> list[list[int]]:
    """Like :func:`nbest_segmentations` but sentencepiece ids (unknown characters are id 0)."""
    return _distinct_nbest(sp, text, k, as_ids=True)


class LongestMatch:
    """Baseline segmenter: greedy longest match over a vocabulary (what one would do without a
    target model).  Text is normalised like sentencepiece (NFKC, ``▁`` for spaces)."""

    def __init__(self, vocab: Iterable[str]):
        self.vocab = {p for p in vocab if p and p not in (UNK, BOS, EOS)}
        self.max_len = max(len(p) for p in self.vocab)

    def encode(self, text: str) -> list[str]:
        s = SPACE + SPACE.join(unicodedata.normalize("NFKC", text).split())
        out, i = [], 0
        while i < len(s):
            for n in range(min(self.max_len, len(s) - i), 0, -1):
                if s[i:i + n] in self.vocab:
                    break
            out.append(s[i:i + n])  # n == 1 on no match: an unknown character
            i += n
        return out


def _spans(pieces: Sequence[str]) -> set[tuple[int, int]]:
    spans, pos = set(), 0
    for p in pieces:
        spans.add((pos, pos + len(p)))
        pos += len(p)
    return spans


def _compare(golds, preds) -> tuple[float, float]:
    same = sum(1 for g, p in zip(golds, preds) if list(g) == list(p))
    hit = total = 0
    for g, p in zip(golds, preds):
        gs, ps = _spans(g), _spans(p)
        # equal spans over the same string mean the same piece
        hit += len(gs & ps) if "".join(g) == "".join(p) else 0
        total += len(g)
    return same / max(len(golds), 1), hit / max(total, 1)


def evaluate_segmenter(ct2_dir: Path, spm_path: Path, zh_sentences: Sequence[str], nbest: int = 4,
                       *, beam_size: int = 1, outputs: Sequence[Sequence[str]] | None = None,
                       progress: bool = True) -> dict:
    """Compare a target segmenter with the model's own segmentation of its outputs.

    For each source sentence the CTranslate2 model's output pieces are detokenised and segmented
    again.  ``agreement_sentences``: fraction whose 1-best segmentation equals the model's
    pieces; ``agreement_pieces``: fraction of the model's pieces reproduced with the same span;
    ``coverage``: fraction whose pieces are among the ``nbest`` best segmentations
    (``coverage_at`` gives every k <= nbest); ``longest_match_*``: the greedy longest-match
    baseline over the model's vocabulary.
    """
    import sentencepiece as spm

    ct2_dir = Path(ct2_dir)
    sentences = [s for s in zh_sentences if s.strip()]
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
    preds = sp.encode(texts, out_type=str)
    agree_s, agree_p = _compare(golds, preds)
    lm = LongestMatch(read_target_vocabulary(ct2_dir))
    lm_s, lm_p = _compare(golds, [lm.encode(t) for t in texts])
    cov_at = {k: 0 for k in range(1, nbest + 1)}
    for t, g in zip(texts, golds):
        segs = nbest_segmentations(sp, t, nbest)
        for k in range(1, nbest + 1):
            if g in segs[:k]:
                cov_at[k] += 1
    n = max(len(golds), 1)
    return {
        "sentences": len(golds),
        "beam_size": beam_size,
        "nbest": nbest,
        "agreement_sentences": agree_s,
        "agreement_pieces": agree_p,
        "coverage": cov_at[nbest] / n,
        "coverage_at": {str(k): v / n for k, v in cov_at.items()},
        "longest_match_agreement_sentences": lm_s,
        "longest_match_agreement_pieces": lm_p,
        "outputs_with_unk": sum(1 for g in golds if UNK in g),
        "outputs_not_alignable": sum(1 for g in golds if not _alignable(g)),
    }
