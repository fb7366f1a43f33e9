#!/usr/bin/env python3
"""Where the bf16 exact scores' per-pair deviation from fp32 lives (issue 70, fidelity).

Scores N gold pairs of the transfer set and N shifted ones (each source with the next pair's
target) on one thread in fp32, then in bf16 with parts of the network kept in fp32 (a module's
forward run with autocast off and float32 inputs), and prints |delta log P(y|x)| per pair (mean,
p90, p95, max), per token (mean) and the seconds of each run::

    python scripts/fidelity_study.py 150
"""
import contextlib
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import triemine.scoring.forced as F  # noqa: E402
from triemine.evaluation.bucc import read_bucc  # noqa: E402
from triemine.io.paths import DEVSET_ZH_EN, cache_root, shared_path  # noqa: E402
from triemine.models.model_dir import load_model_dir  # noqa: E402

torch.set_num_threads(1)
m = load_model_dir(cache_root() / "models" / "opus-mt-zh-en")
b = read_bucc(shared_path(*DEVSET_ZH_EN, "zh-en.dev.gold"))
src, tgt = dict(zip(b.src.ids, b.src.texts)), dict(zip(b.tgt.ids, b.tgt.texts))
N = int(sys.argv[1]) if len(sys.argv) > 1 else 150
gold = b.gold[:N]
S = [m.encode_source(src[s]) for s, _ in gold]
T = [m.encode_target(tgt[t]) for _, t in gold]
si = np.concatenate([np.arange(N), np.arange(N)])
ti = np.concatenate([np.arange(N), (np.arange(N) + 1) % N])
ntok = np.array([len(T[t]) for t in ti])
AUTOCAST = F.autocast


def fp32_module(mod):
    f = mod.forward

    def fwd(*a, **k):
        a = [x.float() if torch.is_tensor(x) and x.is_floating_point() else x for x in a]
        k = {n: x.float() if torch.is_tensor(x) and x.is_floating_point() else x
             for n, x in k.items()}
        with torch.autocast("cpu", enabled=False):
            return f(*a, **k)
    mod.forward = fwd
    return f


def run(prec, enc_fp32=False, mods=(), body_fp32=False):
    saved = [(x, fp32_module(x)) for x in mods]
    F.autocast = (lambda p, d: contextlib.nullcontext()) if body_fp32 else AUTOCAST
    sc = F.ForcedScorer(m, precision=prec)
    if enc_fp32:
        orig = sc._encode

        def enc(sources):
            with torch.autocast("cpu", enabled=False):
                return orig(sources)
        sc._encode = enc
    t0 = time.perf_counter()
    out = sc.score_pairs(S, T, si, ti)
    for x, f in saved:
        x.forward = f
    return out, time.perf_counter() - t0


L = m.model.decoder.layers
ffn = [x.ffn for x in L]
attn = [p for x in L for a in (x.self_attn, x.encoder_attn)
        for p in (a.q_proj, a.k_proj, a.v_proj, a.out_proj)]
ref, t32 = run("fp32")
CPU = open("/proc/cpuinfo").read().split("model name")[1].split("\n")[0].strip(": \t")
res = {"pairs": 2 * N, "threads": 1, "cpu": CPU, "fp32_s": round(t32, 2)}
for name, kw in [("bf16", {}), ("encoder_fp32", {"enc_fp32": True}),
                 ("decoder_ffn_fp32", {"mods": ffn}), ("decoder_attention_fp32", {"mods": attn}),
                 ("encoder_and_decoder_ffn_fp32", {"enc_fp32": True, "mods": ffn}),
                 ("body_fp32_tiles_bf16", {"body_fp32": True})]:
    v, t = run("bf16", **kw)
    d = np.abs(v - ref)
    res[name] = {"s": round(t, 2), "pair_mean": round(float(d.mean()), 4),
                 "pair_p90": round(float(np.quantile(d, .9)), 4),
                 "pair_p95": round(float(np.quantile(d, .95)), 4),
                 "pair_max": round(float(d.max()), 4),
                 "token_mean": round(float((d / ntok).mean()), 5)}
    print(name, res[name], flush=True)
print(json.dumps(res))
