#!/usr/bin/env bash
# The prepared GPU check of issue 51: bench/gpu_bench.py's exact scores and priors in fp32, TF32,
# bf16 and fp16 (pairs/s, achieved TFLOP/s beside the device's peak, the batch shape chosen by
# measurement among --scorer's), the trie search and the kNN products, on a bare GPU machine of
# this workplace (python3 with CUDA torch, no network, at most 64 MiB carried), in 7-8 minutes.
#
#   scripts/gpu_check.sh prepare            # here, with PyPI and the imported model: writes .whl/
#   scripts/gpu_check.sh run OUT            # there, with .whl carried: records and log in OUT
#   scripts/gpu_check.sh run OUT --rehearse # here: the same steps on the CPU (--device cpu, the
#                                           # tiny model, small sizes): records in OUT too
#
# prepare writes .whl/ (git-ignored): site.zip (the packages the GPU image lacks, for Python
# 3.12: fairseq without its examples and unused extensions, hydra-core, omegaconf, antlr4,
# bitarray), pack/ (the model's weights rounded to 5 bits, gpu_bench --pack-model: OPUS-MT's
# shapes and arithmetic, a measurement of speed, not of quality) and data/ (the BUCC sample).
# run unpacks site.zip to /tmp/site, builds the trie's Cython extension with the machine's
# python3 and runs gpu_bench with --record --results-dir OUT.  The device call:
#   run(command="scripts/gpu_check.sh run $OUT", carry=[".whl"], timeout_s=560)
set -euo pipefail
cd "$(dirname "$0")/.."
BUNDLE=.whl
MAX_BUNDLE_MB=60   # of the 64 MiB that travel: the working tree needs the rest

py_version() { "$1" -c 'import sys; print("%d.%d" % sys.version_info[:2])'; }

prepare() {
  local py=${PYTHON:-python} dl
  dl=$(mktemp -d)
  mkdir -p "$BUNDLE"
  grep -qxF "/.whl/" .gitignore || { echo "gpu_check: .whl/ must be git-ignored" >&2; exit 2; }
  "$py" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 -d "$dl" fairseq-fixed==0.12.3.1 hydra-core==1.3.2 \
    omegaconf==2.3.0 bitarray==3.12.3
  "$py" -m pip download -q --no-deps --no-binary=:all: -d "$dl" antlr4-python3-runtime==4.9.3
  # one zip of the packages' files, without what gpu_bench never imports (fairseq's examples,
  # its NAT / alignment extensions: 17 of its 20 MB)
  "$py" - "$dl" "$BUNDLE/site.zip" <<'EOF'
import sys, tarfile, zipfile
from pathlib import Path
src, out = Path(sys.argv[1]), sys.argv[2]
drop = ("fairseq/examples/", "fairseq/libnat", "fairseq/libbase", "alignment_train_cpu_binding")
with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
    for whl in sorted(src.glob("*.whl")):
        with zipfile.ZipFile(whl) as w:
            for i in w.infolist():
                if not i.filename.startswith(drop) and ".dist-info/" not in i.filename:
                    z.writestr(i, w.read(i))
    for tgz in src.glob("antlr4*.tar.gz"):  # pure Python: its package folder as it is
        with tarfile.open(tgz) as t:
            for m in t.getmembers():
                parts = m.name.split("/")
                if m.isfile() and "antlr4" in parts[1:2] + parts[2:3]:
                    rel = "/".join(parts[parts.index("antlr4"):])
                    z.writestr(rel, t.extractfile(m).read())
EOF
  rm -rf "$dl" "$BUNDLE/pack" "$BUNDLE/data"
  "$py" bench/gpu_bench.py --pack-model default --out "$BUNDLE/pack" --bits 5 | tail -1
  mkdir -p "$BUNDLE/data"
  cp "${TRIEMINE_SHARED:-../shared}"/data/bucc2018/zh-en/zh-en.sample.{zh,en,gold} "$BUNDLE/data/"
  bundle_size
}

bundle_size() {
  local mb
  mb=$(du -sm "$BUNDLE" | cut -f1)
  echo "gpu_check: $BUNDLE is ${mb} MB (at most ${MAX_BUNDLE_MB})"
  [ "$mb" -le "$MAX_BUNDLE_MB" ] || { echo "gpu_check: $BUNDLE too large to travel" >&2; exit 2; }
}

run() {
  local out=${1:?usage: gpu_check.sh run OUT [--rehearse]} rehearse=${2:-}
  mkdir -p "$out"
  local log="$out/gpu_check.log" py site bench_args
  exec > >(tee -a "$log") 2>&1
  echo "gpu_check: $(date -u +%FT%TZ) commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
  export TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1 PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1
  export TRIEMINE_CACHE=/tmp/gpu_check_cache   # the bench's tries and priors: not a shared cache
  [ -f "$BUNDLE/site.zip" ] || { echo "gpu_check: no $BUNDLE/site.zip: run 'gpu_check.sh prepare' here and carry .whl" >&2; exit 2; }
  bundle_size
  site=$(mktemp -d /tmp/gpu_check_site.XXXX)
  if [ "$rehearse" = "--rehearse" ]; then
    # the same steps on this machine's CPU: the bundle unpacks (its Python 3.12 builds are not
    # importable by this venv's Python, which has them already), the bench runs --quick
    py=${PYTHON:-python}
    python3 -m zipfile -e "$BUNDLE/site.zip" "$site"
    test -f "$site/fairseq/__init__.py" -a -f "$site/antlr4/__init__.py" -a -d "$site/hydra"
    echo "gpu_check: rehearsal: bundle unpacked ($(du -sm "$site" | cut -f1) MB); --device cpu, tiny model"
    bench_args=(--quick --stages scores,priors,trie,knn)
  else
    py=python3
    python3 -m zipfile -e "$BUNDLE/site.zip" "$site"
    export PYTHONPATH="$site:$PWD${PYTHONPATH:+:$PYTHONPATH}"
    nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv || true
    bench_args=(--device cuda --packed "$BUNDLE/pack" --data "$BUNDLE/data"
                --pairs 100000 --priors 40000 --scorer 4096:256,16384:2048,32768:4096,65536:4096
                --sources 1024 --batch-sizes 256,1024 --stages scores,priors,trie,knn)
  fi
  echo "gpu_check: python $(py_version "$py"), torch $("$py" -c 'import torch; print(torch.__version__, torch.cuda.is_available())')"
  # the trie's Cython extension, for this Python
  "$py" setup.py build_ext --inplace -q > "$out/build_ext.log" 2>&1 || { tail -20 "$out/build_ext.log"; exit 2; }
  "$py" -c 'import triemine.trie._trie, fairseq, hydra; print("gpu_check: imports ok")'
  local t0=$SECONDS
  timeout 480 "$py" bench/gpu_bench.py "${bench_args[@]}" --precisions fp32,tf32,bf16,fp16 --record --results-dir "$out" \
    --work "$site/work" | tail -1 > "$out/gpu_bench.json"
  echo "gpu_check: gpu_bench $((SECONDS - t0)) s; records in $out"
  "$py" - "$out/gpu_bench.json" <<'EOF'
import json, sys
r = json.loads(open(sys.argv[1]).read())
for stage in ("scores", "priors"):
    s = r["stages"].get(stage, {})
    for p in ("fp32", "tf32", "bf16", "fp16"):
        v = s.get(p, {})
        if "best_per_s" in v:
            b = v[v["best"]]
            print(f"{stage:7s} {p:5s} {v['best_per_s']:>10} /s  {b['tflop_per_s']:>8} TFLOP/s  "
                  f"peak {v.get('peak_tflop_per_s', '-')}  at {v['best']}  "
                  f"max |diff| {b.get('max_diff_vs_first_nats', 0):.4g} nats")
        elif v:
            print(f"{stage:7s} {p:5s} {v}")
EOF
}

case "${1:-}" in
  prepare) prepare ;;
  run) shift; run "$@" ;;
  *) echo "usage: scripts/gpu_check.sh prepare | run OUT [--rehearse]" >&2; exit 2 ;;
esac
