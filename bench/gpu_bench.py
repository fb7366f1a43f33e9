"""GPU benchmark: the mining job's model stages on one GPU, with this package's own code, against
one core of the same machine's CPU in the same run.

    .venv/bin/python bench/gpu_bench.py --quick        # tiny model, torch's "cpu:0" as the device:
    < 1 min
    python bench/gpu_bench.py --device cuda --model M --data D   # on a machine with a GPU
    .venv/bin/python bench/gpu_bench.py --pack-model M --out P   # the weights for a small transfer

What runs on the GPU, each stage after a warm-up, timed with the device synchronised:

* ``scores``: exact log P(y|x) by teacher forcing (:class:`triemine.scoring.forced.ForcedScorer`,
  the job's exact scores) of ``--pairs`` pairs of the BUCC sample (its gold pairs first, then
  random pairs, real texts and so real lengths), at each of the scorer's batch sizes
  ``--scorer`` (the best is the stage's rate: batch shapes chosen by measurement) in each
  arithmetic of ``--precisions``: fp32, TF32 products allowed, the job's bf16 and fp16
  (``--precision``); each with pairs/s, the achieved TFLOP/s beside the device's dense peak and
  its largest score difference from fp32;
* ``priors``: log P(y | empty source) of ``--priors`` target lines (the job's priors);
* ``trie``: the paper's trie search (``--config paper``: pre-expansion, beam 5) of ``--sources``
  sample sources against the sample's 13,589-sentence English trie, at ``--batch-sizes``;
* ``translate``: the fairseq decoder's greedy translations (``mt-only``'s, beam 1) of
  ``--sources`` sources;
* ``knn``: an exact inner-product top-k over float32 (and float16) rows as plain torch products
  on the device, the shape of the haystack's kNN (queries x rows x 512): the arithmetic's rate;
* ``knn_job``: the mining job's own sharded exact kNN, both directions, on the device
  (:func:`triemine.embedding.knn.device_knn` in the job's cells) over the same shape;
* ``knn_cell``: one such cell from memory at the job's query range (``--cell-queries``
  131,072 queries against ``--knn-rows``), the shape of the cells at 10^7-10^8;
* ``profile`` (only when named): one scorer call on ``--profile-pairs`` pairs in each
  arithmetic under ``torch.profiler``, its operators ranked by their own device time.

Each stage also runs a slice of the same items on the CPU of the same machine with one thread
(``torch.set_num_threads(1)``, the workers' setting), which gives the ratio "one GPU = N cores"
measured in one run, and the parity of the two devices (largest score difference, identical
search rows and translations).  The last line printed is one JSON object.

The device machine of this workplace receives at most 64 MiB, less than the imported OPUS-MT
model (304 MB in fp32, 83 MB as CTranslate2 int8), so ``--pack-model`` writes its weights rounded
to ``--bits`` per weight with a float16 scale per group of 64 (xz-compressed) and
``--packed DIR`` rebuilds a model directory from them: the network's shapes and so its
arithmetic are OPUS-MT's, its outputs close to it (measured by ``--pack-model``); a measurement
of speed, not of quality.
"""
from __future__ import annotations

import contextlib
import json
import lzma
import os
import shutil
import sys
from pathlib import Path

import benchlib
from benchlib import cached_tiny_model, machine, shared_model_dir, write_lines

import numpy as np

PACK_GROUP = 64  # weights per float16 scale
PACK_MIN_NUMEL = 1 << 16  # smaller tensors (biases, norms) travel as they are
SAMPLE = ("zh-en.sample.zh", "zh-en.sample.en", "zh-en.sample.gold")


# ---------------------------------------------------------------------------------------------
# the weights, rounded for a small transfer


def _big_tensors(state: dict):
    """``[(key, alias_of_or_None)]`` of the float tensors of at least PACK_MIN_NUMEL elements; a
    tensor that shares storage with an earlier one (tied embeddings) is an alias."""
    import torch

    seen, out = {}, []
    for key, t in state.items():
        if not isinstance(t, torch.Tensor) or not t.is_floating_point() or \
                t.numel() < PACK_MIN_NUMEL:
            continue
        ptr = (t.untyped_storage().data_ptr(), t.storage_offset(), tuple(t.shape))
        out.append((key, seen.get(ptr)))
        seen.setdefault(ptr, key)
    return out


def _round(w: np.ndarray, bits: int):
    """``(q int8, scales float16)``: ``w`` (flattened, padded to whole groups) as integers of
    ``bits`` bits times a scale per group of PACK_GROUP."""
    flat = w.astype(np.float32).ravel()
    pad = (-len(flat)) % PACK_GROUP
    groups = np.concatenate([flat, np.zeros(pad, np.float32)]).reshape(-1, PACK_GROUP)
    top = (1 << (bits - 1)) - 1
    scales = (np.abs(groups).max(1) / top).astype(np.float16)
    s = scales.astype(np.float32)
    s[s == 0] = 1.0
    q = np.clip(np.rint(groups / s[:, None]), -top, top).astype(np.int8)
    return q.ravel()[:len(flat)], scales


def _unround(q: np.ndarray, scales: np.ndarray, shape) -> np.ndarray:
    pad = (-len(q)) % PACK_GROUP
    groups = np.concatenate([q, np.zeros(pad, np.int8)]).reshape(-1, PACK_GROUP)
    return (groups.astype(np.float32) * scales.astype(np.float32)[:, None]).ravel()[:len(q)] \
        .reshape(shape)


def pack_model(model_dir: Path, out: Path, bits: int) -> dict:
    """Write ``out/``: the model directory's small files, ``skeleton.pt`` (the checkpoint without
    its large tensors), ``weights.xz`` and ``scales.npy``."""
    import torch

    ckpt = torch.load(model_dir / "checkpoint.pt", map_location="cpu", weights_only=False)
    state = ckpt["model"]
    big = _big_tensors(state)
    out.mkdir(parents=True, exist_ok=True)
    qs, scales, index = [], [], []
    for key, alias in big:
        t = state[key]
        if alias is None:
            q, s = _round(t.numpy(), bits)
            qs.append(q)
            scales.append(s)
        index.append({"key": key, "shape": list(t.shape), "alias": alias})
    for key, _ in big:
        state[key] = None
    torch.save(ckpt, out / "skeleton.pt")
    with lzma.open(out / "weights.xz", "wb", preset=6) as f:
        f.write(np.concatenate(qs).tobytes())
    np.save(out / "scales.npy", np.concatenate(scales))
    meta = json.loads((model_dir / "triemine-model.json").read_text(encoding="utf-8"))
    meta.pop("origin", None)  # the CTranslate2 directory does not travel: fairseq decodes
    (out / "triemine-model.json").write_text(json.dumps(meta, indent=1), encoding="utf-8")
    for p in model_dir.iterdir():
        if p.suffix in (".txt", ".spm"):
            shutil.copy(p, out / p.name)
    info = {"bits": bits, "group": PACK_GROUP, "tensors": index}
    (out / "pack.json").write_text(json.dumps(info), encoding="utf-8")
    return {"bits": bits, "group": PACK_GROUP, "rounded_tensors": len(qs),
            "bytes": sum(p.stat().st_size for p in out.iterdir())}


def unpack_model(pack: Path, out: Path) -> Path:
    """A model directory at ``out`` from :func:`pack_model`'s ``pack``."""
    import torch

    info = json.loads((pack / "pack.json").read_text(encoding="utf-8"))
    ckpt = torch.load(pack / "skeleton.pt", map_location="cpu", weights_only=False)
    with lzma.open(pack / "weights.xz", "rb") as f:
        q_all = np.frombuffer(f.read(), dtype=np.int8)
    s_all = np.load(pack / "scales.npy")
    q_at = s_at = 0
    state = ckpt["model"]
    for t in info["tensors"]:
        if t["alias"] is not None:
            state[t["key"]] = state[t["alias"]]
            continue
        n = int(np.prod(t["shape"]))
        ng = -(-n // info["group"])
        w = _unround(q_all[q_at:q_at + n], s_all[s_at:s_at + ng], t["shape"])
        state[t["key"]] = torch.from_numpy(np.ascontiguousarray(w))
        q_at, s_at = q_at + n, s_at + ng
    out.mkdir(parents=True, exist_ok=True)
    torch.save(ckpt, out / "checkpoint.pt")
    for p in pack.iterdir():
        if p.suffix in (".txt", ".spm") or p.name == "triemine-model.json":
            shutil.copy(p, out / p.name)
    return out


def pack_fidelity(model_dir: Path, packed_dir: Path, data: Path, n: int = 64) -> dict:
    """How close the rounded weights are to the model's: forced scores of the sample's first
    ``n`` gold pairs (mean and largest difference, nats a sentence) and greedy translations of
    their sources (identical fraction)."""
    from triemine.models.model_dir import load_model_dir
    from triemine.mining.translate import make_translator
    from triemine.scoring.forced import ForcedScorer

    pairs = _gold_pairs(data)[:n]
    res = {}
    outs = []
    for d in (model_dir, packed_dir):
        m = load_model_dir(d)
        src, tgt = [m.encode_source(s) for s, _ in pairs], [m.encode_target(t) for _, t in pairs]
        sc = ForcedScorer(m).score_pairs(src, tgt, np.arange(len(pairs)), np.arange(len(pairs)))
        hyp = make_translator(m, beam=1, backend="fairseq")([s for s, _ in pairs])
        outs.append((sc, hyp))
    diff = np.abs(outs[0][0] - outs[1][0])
    res["score_diff_mean_nats"] = round(float(diff.mean()), 4)
    res["score_diff_max_nats"] = round(float(diff.max()), 4)
    res["score_mean_nats"] = round(float(outs[0][0].mean()), 4)
    res["translations_identical"] = round(float(np.mean([a == b for a, b in
                                                         zip(outs[0][1], outs[1][1])])), 4)
    res["pairs"] = len(pairs)
    return res


# ---------------------------------------------------------------------------------------------
# data


def _tiny_sample(out: Path, n: int) -> Path:
    """The tiny model's synthetic language pair in the sample's layout: ``n`` sources, their
    translations and as many other targets, the first half of the sources with a gold pair."""
    from triemine.testing.tiny_model import synthetic_pairs

    pairs = synthetic_pairs(2 * n, seed=5)
    out.mkdir(parents=True, exist_ok=True)
    write_lines(out / SAMPLE[0], [f"zh-{i:06d}\t{s}" for i, (s, _) in enumerate(pairs[:n])])
    write_lines(out / SAMPLE[1], [f"en-{i:06d}\t{t}" for i, (_, t) in enumerate(pairs[:n // 2]
                                                                               + pairs[n:])])
    write_lines(out / SAMPLE[2], [f"zh-{i:06d}\ten-{i:06d}" for i in range(n // 2)])
    return out


def _sample(data: Path):
    from triemine.io.corpus import read_corpus

    return read_corpus(data / SAMPLE[0]), read_corpus(data / SAMPLE[1])


def _gold_pairs(data: Path):
    """``[(zh text, en text)]`` of the sample's gold pairs, in the gold file's order."""
    from triemine.evaluation.bucc import read_gold

    src, tgt = _sample(data)
    s_of = {i: t for i, t in zip(src.ids, src.texts)}
    t_of = {i: t for i, t in zip(tgt.ids, tgt.texts)}
    return [(s_of[a], t_of[b]) for a, b in read_gold(data / SAMPLE[2]) if a in s_of and b in t_of]


def _pairs(data: Path, n: int, seed: int = 0):
    """``(sources, targets)`` texts of ``n`` pairs: the gold pairs, then random pairs."""
    src, tgt = _sample(data)
    gold = _gold_pairs(data)[:n]
    rng = np.random.default_rng(seed)
    ok_s = [t for t in src.texts if t.strip()]
    ok_t = [t for t in tgt.texts if t.strip()]
    more = n - len(gold)
    s = [a for a, _ in gold] + [ok_s[i] for i in rng.integers(0, len(ok_s), more)]
    t = [b for _, b in gold] + [ok_t[i] for i in rng.integers(0, len(ok_t), more)]
    return s, t


# ---------------------------------------------------------------------------------------------
# timing


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        import torch
        torch.cuda.synchronize()


def _timed(fn, device: str):
    _sync(device)
    with benchlib.timer() as t:
        out = fn()
        _sync(device)
    return out, t.s


@contextlib.contextmanager
def _one_core():
    """torch on one thread (the workers' setting) for the duration, restored after."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


# ---------------------------------------------------------------------------------------------
# stages


# dense peak rates (TFLOP/s, no sparsity) of the devices this workplace lends, by the name torch
# reports: NVIDIA's data sheets for the SXM parts (the H200 has the H100 SXM's compute)
PEAK_TFLOPS = {"H100 PCIe": {"fp32": 51.2, "tf32": 378.0, "bf16": 756.0, "fp16": 756.0},
               "H100": {"fp32": 66.9, "tf32": 494.7, "bf16": 989.4, "fp16": 989.4},
               "H200": {"fp32": 66.9, "tf32": 494.7, "bf16": 989.4, "fp16": 989.4}}


def peak_tflops(device: str) -> dict:
    """The device's dense peak rates by arithmetic (:data:`PEAK_TFLOPS`), ``{}`` when unknown
    (the CPU, another card)."""
    if not device.startswith("cuda"):
        return {}
    import torch

    name = torch.cuda.get_device_name(0)
    for key in sorted(PEAK_TFLOPS, key=len, reverse=True):  # "H100 PCIe" before "H100"
        if key in name:
            return PEAK_TFLOPS[key]
    return {}


def model_flops(model, source_tokens: int, target_tokens: int) -> float:
    """The multiply-adds x 2 of teacher-forcing ``target_tokens`` target tokens against
    ``source_tokens`` source tokens: every weight matrix of the encoder once per source token,
    of the decoder and its output projection once per target token (attention's own products,
    a few percent at these lengths, left out: the rates are a lower bound)."""
    net = model.model

    def matrices(mod, skip=()):
        return sum(p.numel() for n, p in mod.named_parameters()
                   if p.dim() == 2 and not any(s in n for s in skip))
    enc = matrices(net.encoder, ("embed_tokens", "embed_positions"))
    dec = matrices(net.decoder, ("embed_tokens", "embed_positions", "output_projection"))
    proj = net.decoder.output_projection.weight.numel()
    return 2.0 * (enc * source_tokens + (dec + proj) * target_tokens)


def stage_scores(gpu, cpu, device: str, srcs, tgts, configs, n_cpu: int, prior: bool,
                 precisions=("fp32", "tf32")) -> dict:
    """Forced scores (``prior``: of the targets given the empty source) of every pair on the
    device at each ``(max_tokens, chunk)`` of ``configs`` in each of ``precisions`` (fp32, TF32
    products, the scorer's bf16 / fp16: ``ForcedScorer(precision=...)``), with the achieved
    TFLOP/s (:func:`model_flops`) beside the device's peak and each arithmetic's largest
    difference from fp32, and of the first ``n_cpu`` on one CPU core (the scorer's CPU
    defaults).  An arithmetic the device refuses (fp16 on the CPU) is recorded as refused."""
    from triemine.embedding.knn import matmul_precision
    from triemine.errors import InputError
    from triemine.scoring.forced import ForcedScorer

    def enc(m):
        return [m.encode_source(s) for s in srcs], [m.encode_target(t) for t in tgts]

    def run(model, s, t, dev, cfg, n, precision="fp32"):
        mt, chunk = cfg or (None, None)  # None: the scorer's defaults for the device
        sc = ForcedScorer(model, max_tokens=mt, chunk=chunk, device=dev,
                          precision="fp32" if precision == "tf32" else precision)
        idx = np.arange(n)
        if prior:
            return lambda: sc.prior(t[:n])
        return lambda: sc.score_pairs(s, t, idx, idx)

    n = len(tgts)
    s_g, t_g = enc(gpu)
    src_tokens = 1 if prior else int(sum(len(x) for x in s_g))  # the priors' one empty source
    res = {"items": n, "target_tokens": int(sum(len(x) for x in t_g)),
           "source_tokens": int(sum(len(x) for x in s_g))}
    flops = model_flops(gpu, src_tokens, res["target_tokens"])
    peaks = peak_tflops(device)
    res["gflop_per_item"] = round(flops / n / 1e9, 3)
    ref = None
    for precision in precisions:
        rows = {}
        try:
            with matmul_precision(tf32=precision == "tf32"):
                run(gpu, s_g, t_g, device, configs[0], min(n, 256), precision)()  # warm-up
                for cfg in configs:
                    got, secs = _timed(run(gpu, s_g, t_g, device, cfg, n, precision), device)
                    key = f"max_tokens={cfg[0]},chunk={cfg[1]}"
                    rows[key] = {"s": round(secs, 3), "per_s": round(n / secs, 1),
                                 "tflop_per_s": float(f"{flops / secs / 1e12:.4g}")}
                    if ref is None:
                        ref = got
                    else:
                        rows[key]["max_diff_vs_first_nats"] = float(np.abs(got - ref).max())
        except (InputError, ValueError, RuntimeError) as exc:  # e.g. fp16 on the CPU
            res[precision] = {"refused": f"{type(exc).__name__}: {exc}"}
            continue
        best = max(rows, key=lambda k: rows[k]["per_s"])
        rows["best"] = best
        rows["best_per_s"] = rows[best]["per_s"]
        if precision in peaks:
            rows["peak_tflop_per_s"] = peaks[precision]
            rows["share_of_peak"] = round(rows[best]["tflop_per_s"] / peaks[precision], 4)
        res[precision] = rows
    s_c, t_c = enc(cpu)
    with _one_core():
        run(cpu, s_c, t_c, "cpu", None, min(n_cpu, 16))()  # warm-up
        got, secs = _timed(run(cpu, s_c, t_c, "cpu", None, n_cpu), "cpu")
    res["cpu_one_thread"] = {"items": n_cpu, "s": round(secs, 3), "per_s": round(n_cpu / secs, 2),
                             "max_diff_vs_gpu_fp32_nats": float(np.abs(got - ref[:n_cpu]).max())}
    best = res["fp32"]["best_per_s"]
    res["gpu_fp32_best_per_s"] = best
    res["cores_per_gpu_fp32"] = round(best / res["cpu_one_thread"]["per_s"], 1)
    for precision in precisions:
        if precision != "fp32" and "best_per_s" in res[precision]:
            res[f"speedup_{precision}_vs_fp32"] = round(res[precision]["best_per_s"] / best, 2)
    return res


def stage_profile(gpu, device: str, srcs, tgts, cfg, precisions, top: int = 12) -> dict:
    """One scorer call on ``len(tgts)`` pairs at ``cfg`` (max_tokens, chunk) in each of
    ``precisions`` under ``torch.profiler``: the wall seconds, the operators' count and the
    ``top`` operators by their own device time (CPU time on the CPU), to find what a half
    arithmetic spends its time on besides the products."""
    from torch.profiler import ProfilerActivity, profile

    from triemine.embedding.knn import matmul_precision
    from triemine.scoring.forced import ForcedScorer

    s = [gpu.encode_source(x) for x in srcs]
    t = [gpu.encode_target(x) for x in tgts]
    idx = np.arange(len(t))
    cuda = device.startswith("cuda")
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    key = "self_device_time_total" if cuda else "self_cpu_time_total"
    res = {"pairs": len(t), "max_tokens": cfg[0], "chunk": cfg[1]}
    for precision in precisions:
        sc = ForcedScorer(gpu, max_tokens=cfg[0], chunk=cfg[1], device=device,
                          precision="fp32" if precision == "tf32" else precision)
        with matmul_precision(tf32=precision == "tf32"):
            sc.score_pairs(s, t, idx[:64], idx[:64])  # warm-up
            with profile(activities=acts) as prof:
                _, secs = _timed(lambda: sc.score_pairs(s, t, idx, idx), device)
        events = prof.key_averages()
        ranked = sorted(events, key=lambda e: getattr(e, key, 0) or 0, reverse=True)[:top]
        total = sum(getattr(e, key, 0) or 0 for e in events)
        res[precision] = {"s": round(secs, 3), "ops": int(sum(e.count for e in events)),
                          "self_ms": round(total / 1e3, 1),
                          "top": [{"op": e.key[:60], "count": int(e.count),
                                   "self_ms": round((getattr(e, key, 0) or 0) / 1e3, 2),
                                   "share": round((getattr(e, key, 0) or 0) / max(total, 1), 3)}
                                  for e in ranked]}
    return res


def _rows(tsv: Path):
    """The TSV's ``(source id, target id)`` rows and their score column."""
    from triemine.io.tsv import read_mined

    m = read_mined(tsv)
    return list(zip(m.src_ids, m.tgt_ids)), m.col("score")


def stage_trie(gpu, cpu, device: str, data: Path, work: Path, n: int, n_cpu: int, beam: int,
               batch_sizes, half=()) -> dict:
    """The trie search of the first ``n`` sample sources on the device at each batch size and of
    the first ``n_cpu`` on one CPU core (default batch size), with the rows compared; then at
    each batch size in each arithmetic of ``half`` (bf16, fp16: the decoder under
    ``torch.autocast``, its logits rounded to that type, fairseq's log-softmax and the sums in
    float32; not yet a setting of the job), with the share of the fp32 rows it keeps."""
    from triemine.decoding.driver import mine_to_tsv
    from triemine.decoding.settings import SearchSettings
    from triemine.decoding.trie_cache import get_trie
    from triemine.scoring.forced import autocast

    src, tgt = _sample(data)
    lines = [f"{i}\t{t}" for i, t in zip(src.ids, src.texts) if t.strip()]
    srcs = write_lines(work / "trie.src", lines[:n])
    few = write_lines(work / "trie.cpu.src", lines[:n_cpu])
    target = data / SAMPLE[1]
    (trie, build_s) = _timed(lambda: get_trie(gpu, target), "cpu")
    res = {"sources": n, "beam": beam, "targets": trie.n_lines, "trie_build_s": round(build_s, 2)}
    warm = write_lines(work / "trie.warm.src", lines[:8])
    mine_to_tsv(gpu, warm, target, work / "warm.tsv", trie=trie, device=device,
                search=SearchSettings(beam=beam))
    for b in batch_sizes:
        out = work / f"trie.gpu.{b}.tsv"
        search = SearchSettings(beam=beam, batch_size=b)
        _, secs = _timed(lambda: mine_to_tsv(gpu, srcs, target, out, trie=trie, device=device,
                                             search=search), device)
        res[f"batch_{b}"] = {"s": round(secs, 2), "sent_per_s": round(n / secs, 2)}
    first = work / f"trie.gpu.{batch_sizes[0]}.tsv"
    with _one_core():
        out = work / "trie.cpu.tsv"
        search = SearchSettings(beam=beam, batch_size=batch_sizes[0])
        _, secs = _timed(lambda: mine_to_tsv(cpu, few, target, out, trie=trie, search=search),
                         "cpu")
    res["cpu_one_thread"] = {"sources": n_cpu, "s": round(secs, 2),
                             "sent_per_s": round(n_cpu / secs, 3)}
    g_rows, g_scores = _rows(first)
    c_rows, c_scores = _rows(out)
    keep = [i for i, r in enumerate(g_rows) if r[0] in {c[0] for c in c_rows}]
    same = [g_rows[i] for i in keep] == c_rows
    res["cpu_one_thread"]["rows_identical_to_gpu"] = same
    if same and c_rows:
        res["cpu_one_thread"]["max_score_diff_vs_gpu"] = float(np.abs(g_scores[keep]
                                                                      - c_scores).max())
    best = max(v["sent_per_s"] for k, v in res.items() if k.startswith("batch_"))
    res["gpu_best_sent_per_s"] = best
    res["cores_per_gpu"] = round(best / res["cpu_one_thread"]["sent_per_s"], 1)
    for p in half:
        rows = {}
        for b in batch_sizes:
            out = work / f"trie.gpu.{p}.{b}.tsv"
            search = SearchSettings(beam=beam, batch_size=b)
            with autocast(p, device):
                _, secs = _timed(lambda: mine_to_tsv(gpu, srcs, target, out, trie=trie,
                                                     device=device, search=search), device)
            h_rows, _ = _rows(out)
            ref_rows, _ = _rows(work / f"trie.gpu.{b}.tsv")
            rows[f"batch_{b}"] = {"s": round(secs, 2), "sent_per_s": round(n / secs, 2),
                                  "rows_kept_from_fp32": round(len(set(h_rows) & set(ref_rows))
                                                               / max(1, len(ref_rows)), 4)}
        rows["best_sent_per_s"] = max(v["sent_per_s"] for v in rows.values())
        rows["speedup_vs_fp32"] = round(rows["best_sent_per_s"] / best, 2)
        res[p] = rows
    return res


def stage_translate(gpu, cpu, device: str, srcs, n_cpu: int, subs) -> dict:
    """Greedy translations (``mt-only``'s beam 1) by the fairseq decoder, on the device with each
    sub-batch of ``subs`` and on one CPU core, the first ``n_cpu`` compared with the first's."""
    from triemine.mining.translate import make_translator, translate_lines

    res = {"sources": len(srcs)}
    hyp = None
    for sub in subs:
        tr = make_translator(gpu, beam=1, device=device, backend="fairseq", sub=sub)
        translate_lines(tr, srcs[:32])  # warm-up
        got, secs = _timed(lambda: translate_lines(tr, srcs), device)
        res[f"sub_{sub}"] = {"s": round(secs, 2), "sent_per_s": round(len(srcs) / secs, 2)}
        if hyp is None:
            hyp = got
        else:
            res[f"sub_{sub}"]["identical_to_first"] = round(float(np.mean(
                [a == b for a, b in zip(hyp, got)])), 4)
    res["sent_per_s"] = max(v["sent_per_s"] for k, v in res.items() if k.startswith("sub_"))
    trc = make_translator(cpu, beam=1, device="cpu", backend="fairseq")
    with _one_core():
        translate_lines(trc, srcs[:4])
        hyp_c, secs = _timed(lambda: translate_lines(trc, srcs[:n_cpu]), "cpu")
    res["cpu_one_thread"] = {"sources": n_cpu, "s": round(secs, 2),
                             "sent_per_s": round(n_cpu / secs, 3),
                             "identical_to_gpu": round(float(np.mean([a == b for a, b in
                                                                      zip(hyp, hyp_c)])), 4)}
    res["cores_per_gpu"] = round(res["sent_per_s"] / res["cpu_one_thread"]["sent_per_s"], 1)
    return res


def _topk_ip(q, db, k: int, block: int):
    """The device search's merge (:func:`triemine.embedding.knn.topk_blocks`) over ``db``, a
    tensor already where ``q`` is, in blocks of ``block`` rows, all queries in one product."""
    from triemine.embedding.knn import topk_blocks

    blocks = ((b, db[b:b + block]) for b in range(0, db.size(0), block))
    return topk_blocks(q, blocks, k, query_block=max(1, len(q)))


def stage_knn(device: str, queries: int, rows: int, dim: int, k: int, block: int,
              n_cpu: int) -> dict:
    """Exact inner-product top-k of ``queries`` random unit rows against ``rows`` (float32 and
    float16 on the device), and of ``n_cpu`` queries against the same rows on one CPU core."""
    import torch

    from triemine.embedding.knn import matmul_precision

    g = torch.Generator().manual_seed(0)
    db = torch.nn.functional.normalize(torch.randn(rows, dim, generator=g), dim=1)
    q = torch.nn.functional.normalize(torch.randn(queries, dim, generator=g), dim=1)
    madds = queries * rows * dim
    res = {"queries": queries, "rows": rows, "dim": dim, "k": k, "block": block}
    ref = None
    dbd, qd = db.to(device), q.to(device)
    for name, dtype in (("fp32", torch.float32), ("fp16", torch.float16)):
        if name == "fp16" and not device.startswith("cuda"):
            continue
        a, b = qd.to(dtype), dbd.to(dtype)
        with matmul_precision(tf32=False):
            _topk_ip(a[:64], b, k, block)  # warm-up
            (s, i), secs = _timed(lambda: _topk_ip(a, b, k, block), device)
        res[name] = {"s": round(secs, 4), "madds_per_s": float(f"{madds / secs:.3g}")}
        if ref is None:
            ref = i.cpu()
        else:
            res[name]["top1_same_as_fp32"] = round(float((i.cpu()[:, 0] == ref[:, 0])
                                                         .float().mean()), 4)
    with _one_core():
        (s, i), secs = _timed(lambda: _topk_ip(q[:n_cpu], db, k, block), "cpu")
    res["cpu_one_thread"] = {"queries": n_cpu, "s": round(secs, 3),
                             "madds_per_s": float(f"{n_cpu * rows * dim / secs:.3g}"),
                             "ids_identical_to_gpu_fp32": bool(torch.equal(i, ref[:n_cpu]))}
    res["cores_per_gpu_fp32"] = round(res["fp32"]["madds_per_s"]
                                      / res["cpu_one_thread"]["madds_per_s"], 1)
    if "fp16" in res:
        res["cores_per_gpu_fp16"] = round(res["fp16"]["madds_per_s"]
                                          / res["cpu_one_thread"]["madds_per_s"], 1)
    return res


def stage_knn_job(device: str, work: Path, queries: int, rows: int, dim: int, k: int,
                  n_cpu: int) -> dict:
    """The mining job's own sharded exact kNN (:func:`triemine.embedding.knn_shards.knn_searches`,
    both directions' cells in this process) on ``device`` over random unit rows written as the
    job writes its embeddings, the first ``n_cpu`` queries of each direction checked against the
    search on one CPU thread."""
    import torch

    from triemine.embedding.knn_shards import knn_searches
    from triemine.distributed.local import InlinePool
    from triemine.embedding.knn import device_knn

    rng = np.random.default_rng(0)
    paths = {}
    for name, n in (("src", queries), ("tgt", rows)):
        x = rng.standard_normal((n, dim), dtype=np.float32)
        x /= np.linalg.norm(x, axis=1, keepdims=True)
        paths[name] = work / f"knn_job.{name}.npy"
        np.save(paths[name], x)
        del x
    searches = [(paths["src"], paths["tgt"], "fwd"), (paths["tgt"], paths["src"], "bwd")]
    (out, secs) = _timed(lambda: knn_searches(searches, k, work / "knn_job", InlinePool(),
                                              device=device), device)
    madds = 2 * queries * rows * dim
    res = {"queries": queries, "rows": rows, "dim": dim, "k": k,
           "both_directions_s": round(secs, 2),
           "madds_per_s": float(f"{madds / secs:.3g}")}
    for i, name in enumerate(("fwd", "bwd")):  # each direction alone, new cells
        _, t = _timed(lambda: knn_searches([searches[i][:2] + (f"{name}.again",)], k,
                                           work / "knn_job", InlinePool(), device=device), device)
        res[f"{name}_s"] = round(t, 2)
    q_mem, d_mem = np.load(paths["src"]), np.load(paths["tgt"])
    _, t = _timed(lambda: device_knn(q_mem, d_mem, k, device), device)
    res["fwd_in_memory_s"] = round(t, 2)  # the search alone: no files, no cells
    same = []
    with _one_core():
        for (q_path, d_path, _), (_, idx) in zip(searches, out):
            q = np.load(q_path, mmap_mode="r")[:n_cpu]
            _, want = device_knn(np.asarray(q), np.load(d_path, mmap_mode="r"), k, "cpu")
            same.append(bool(np.array_equal(np.asarray(idx[:n_cpu]), want)))
    res["cpu_check"] = {"queries_each_way": n_cpu, "ids_identical": same}
    res["torch_threads"] = torch.get_num_threads()
    return res


def stage_knn_cell(device: str, queries: int, rows: int, dim: int, k: int) -> dict:
    """One exact kNN cell as the job plans it off the CPU (``queries`` rows of a query range
    against ``rows`` database rows, :func:`triemine.embedding.knn.device_knn` with its blocks)
    from memory, timed twice: the copies to the device and the products."""
    from triemine.embedding.knn import DEVICE_QUERY_BLOCK, DEVICE_ROW_BLOCK, device_knn

    rng = np.random.default_rng(1)
    d = rng.standard_normal((rows, dim), dtype=np.float32)
    d /= np.linalg.norm(d, axis=1, keepdims=True)
    q = d[rng.integers(0, rows, queries)] + 0.01 * rng.standard_normal((queries, dim),
                                                                        dtype=np.float32)
    res = {"queries": queries, "rows": rows, "dim": dim, "k": k,
           "blocks": [DEVICE_QUERY_BLOCK, DEVICE_ROW_BLOCK]}
    for run in ("first_s", "again_s"):
        _, t = _timed(lambda: device_knn(q, d, k, device), device)
        res[run] = round(t, 3)
    res["madds_per_s"] = float(f"{queries * rows * dim / res['again_s']:.3g}")
    return res


# ---------------------------------------------------------------------------------------------


def _runs_on(precision: str, device: str) -> bool:
    """Whether the job's ``precision`` runs on ``device`` (fp16 does not on the CPU)."""
    from triemine.errors import InputError
    from triemine.scoring.precision import check_precision

    try:
        check_precision(precision, device)
    except InputError:
        return False
    return True


def _device_info(device: str) -> dict:
    import torch

    info = {"device": device, "torch": torch.__version__, "machine": machine()}
    if device.startswith("cuda"):
        p = torch.cuda.get_device_properties(0)
        info.update(gpu=p.name, gpu_memory_gb=round(p.total_memory / 2 ** 30, 1),
                    cuda=torch.version.cuda)
    return info


def main(argv=None) -> int:
    ap = benchlib.parser(__doc__, quick="tiny synthetic model, every stage on the CPU, small "
                                        "sizes (< 1 min)")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--model", help="model directory (default: the imported OPUS-MT model)")
    ap.add_argument("--packed", help="a --pack-model directory: rebuild the model from it")
    ap.add_argument("--data", help="directory with the BUCC zh-en sample (default: shared)")
    ap.add_argument("--work", help="scratch directory (default: a temporary one)")
    ap.add_argument("--stages", default="scores,priors,trie,translate,knn,knn_job,knn_cell")
    ap.add_argument("--pairs", type=int, default=10000)
    ap.add_argument("--priors", type=int, default=5000)
    ap.add_argument("--sources", type=int, default=512)
    ap.add_argument("--beam", type=int, default=5)
    ap.add_argument("--scorer", default="4096:256,16384:256,16384:2048,65536:4096",
                    help="the scorer's max_tokens:chunk settings on the device (each timed; "
                         "the best is the stage's rate)")
    ap.add_argument("--precisions", default="fp32,tf32,bf16,fp16",
                    help="the scores' and priors' arithmetics (fp32, tf32, bf16, fp16)")
    ap.add_argument("--batch-sizes", default="64,256")
    ap.add_argument("--profile-pairs", type=int, default=4000,
                    help="pairs of the profile stage (one scorer call a precision)")
    ap.add_argument("--translate-subs", default="32,256",
                    help="the fairseq decoder's sub-batches for the translations")
    ap.add_argument("--knn-queries", type=int, default=8624)
    ap.add_argument("--knn-rows", type=int, default=1_000_000)
    ap.add_argument("--cell-queries", type=int, default=131072,
                    help="queries of the knn_cell stage (a full query range of the job's cells)")
    ap.add_argument("--cpu-items", type=int, default=128, help="pairs and priors on one CPU core")
    ap.add_argument("--cpu-sources", type=int, default=16, help="sources on one CPU core")
    ap.add_argument("--pack-model", help="write the model's rounded weights to --out and stop")
    ap.add_argument("--out", help="with --pack-model: the directory to write")
    ap.add_argument("--bits", type=int, default=5, help="with --pack-model: bits a weight")
    args = ap.parse_args(argv)
    run = benchlib.start("gpu_bench", args)

    from triemine.io.paths import BUCC_ZH_EN, shared_path

    data = Path(args.data) if args.data else None  # the shared sample, when a stage reads it
    work = benchlib.work_dir(args.work, "gpu_bench.")

    if args.pack_model:
        model_dir = shared_model_dir(args.pack_model if args.pack_model != "default" else None,
                                     "gpu_bench")
        out = Path(args.out or work / "pack")
        res = pack_model(model_dir, out, args.bits)
        rebuilt = unpack_model(out, work / "unpacked")
        res["fidelity"] = pack_fidelity(model_dir, rebuilt, data or Path(
            shared_path(*BUCC_ZH_EN, SAMPLE[0])).parent)
        res["out"] = str(out)
        return run.finish(res)

    stages = [s for s in args.stages.split(",") if s]
    needs_model = [s for s in stages if not s.startswith("knn")]
    if data is None and needs_model and not args.quick:
        data = Path(shared_path(*BUCC_ZH_EN, SAMPLE[0])).parent
    model_dir = None
    if args.quick:  # torch's CPU device under another name: every off-CPU code path, here
        args.device = "cpu:0"
        args.pairs, args.priors, args.sources = 64, 64, 16
        args.scorer, args.batch_sizes = "512:256,2048:1024", "8,16"
        args.translate_subs = "4,16"
        args.knn_queries, args.knn_rows, args.cell_queries = 64, 20000, 256
        args.cpu_items, args.cpu_sources = 32, 4
        model_dir = cached_tiny_model()[0] if needs_model else None
    elif not needs_model:
        pass
    elif args.packed:
        model_dir = unpack_model(Path(args.packed), work / "model")
    else:
        model_dir = shared_model_dir(args.model, "gpu_bench")

    import torch

    from triemine.models.model_dir import load_model_dir

    res_threads = torch.get_num_threads()
    os.environ.setdefault("TRIEMINE_CACHE", str(work / "cache"))
    res = {**_device_info(args.device), "model": str(model_dir),
           "weights": ("tiny synthetic model" if args.quick else
                       "rounded for transfer (--packed): timing, not quality" if args.packed
                       else "as imported"),
           "cpu_threads_for_cpu_rows": 1, "torch_threads_for_device_rows": res_threads,
           "stages": {}}
    if needs_model:
        gpu, load_s = _timed(lambda: load_model_dir(model_dir, device=args.device), args.device)
        cpu = load_model_dir(model_dir)
        res["model_load_s"] = round(load_s, 2)
    sizes = [tuple(int(v) for v in x.split(":")) for x in args.scorer.split(",")]
    batch_sizes = [int(x) for x in args.batch_sizes.split(",")]
    if args.quick:  # the tiny model's sources are its own synthetic language
        data = _tiny_sample(work / "data", 400)
    for stage in stages:
        with benchlib.timer() as clock:
            try:
                if stage in ("scores", "priors"):
                    n = args.pairs if stage == "scores" else args.priors
                    s, t = _pairs(data, n, seed=0 if stage == "scores" else 1)
                    out = stage_scores(gpu, cpu, args.device, s, t, sizes, args.cpu_items,
                                       prior=stage == "priors",
                                       precisions=[p for p in args.precisions.split(",") if p])
                elif stage == "trie":
                    half = [p for p in args.precisions.split(",") if p in ("bf16", "fp16")
                            and _runs_on(p, args.device)]
                    out = stage_trie(gpu, cpu, args.device, data, work, args.sources,
                                     args.cpu_sources, args.beam, batch_sizes, half)
                elif stage == "profile":
                    s, t = _pairs(data, min(args.pairs, args.profile_pairs), seed=0)
                    out = stage_profile(gpu, args.device, s, t, sizes[-1],
                                        [p for p in args.precisions.split(",") if p
                                         and _runs_on(p, args.device)])
                elif stage == "translate":
                    s, _ = _pairs(data, args.sources, seed=2)
                    out = stage_translate(gpu, cpu, args.device, s, args.cpu_sources,
                                          [int(x) for x in args.translate_subs.split(",")])
                elif stage == "knn":
                    out = stage_knn(args.device, args.knn_queries, args.knn_rows, 512, 4,
                                    1 << 18, min(args.knn_queries, 64))
                elif stage == "knn_cell":
                    out = stage_knn_cell(args.device, args.cell_queries, args.knn_rows, 512, 4)
                elif stage == "knn_job":
                    out = stage_knn_job(args.device, work, args.knn_queries, args.knn_rows, 512, 4,
                                        min(args.knn_queries, 64))
                else:
                    raise SystemExit(f"gpu_bench: unknown stage {stage!r}")
            except Exception as exc:  # one stage's failure is reported; the others still run
                import traceback
                traceback.print_exc()
                out = {"error": f"{type(exc).__name__}: {exc}"}
        out["wall_s"] = round(clock.s, 2)
        if args.device.startswith("cuda"):
            out["gpu_peak_mb"] = round(torch.cuda.max_memory_allocated() / 2 ** 20)
            torch.cuda.reset_peak_memory_stats()
        res["stages"][stage] = out
        print(f"{stage}: {json.dumps(out)}", file=sys.stderr, flush=True)
    res["wall_s"] = round(run.elapsed(), 2)
    rc = run.finish(res)
    return 1 if any("error" in v for v in res["stages"].values()) else rc


if __name__ == "__main__":
    sys.exit(main())
