#!/usr/bin/env bash
# The main job on the shared default (run through `make demo`, which builds .venv and imports the
# shared OPUS-MT model first): mine a gold-enriched slice of the BUCC 2018 zh-en sample with
# trie-constrained (pre-expansion) beam search against the FULL English side, then print P/R/F1
# with a per-word cross-entropy threshold, both tuned on the slice's gold (optimistic, LASER
# style) and 2-fold held-out (tuned on one half of the sources, applied to the other).
#
# Knobs (environment): DEMO_GOLD=40 DEMO_OTHER=40 (sources with / without a gold pair),
# DEMO_BEAM=8, DEMO_DIR=$TRIEMINE_CACHE/demo. Rerunning resumes an interrupted mining run.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=.venv/bin
SHARED=${TRIEMINE_SHARED:-$(cd .. && pwd)/shared}
CACHE=${TRIEMINE_CACHE:-$PWD/.cache}
MODEL=${MODEL:-$CACHE/models/opus-mt-zh-en}
GOLD_N=${DEMO_GOLD:-40}
OTHER_N=${DEMO_OTHER:-40}
BEAM=${DEMO_BEAM:-8}
WORK=${DEMO_DIR:-$CACHE/demo}
mkdir -p "$WORK"
[ -f "$MODEL/checkpoint.pt" ] || "$BIN/trie-mine-import" -o "$MODEL"

echo "== slice: first $GOLD_N zh sources with a gold pair + first $OTHER_N without, all 13589 en sentences"
"$BIN/python" - "$SHARED/data/bucc2018/zh-en/zh-en.sample.gold" "$WORK" "$GOLD_N" "$OTHER_N" <<'PY'
import sys
from triemine.evaluation.slices import write_bucc_slice
gold, n = write_bucc_slice(sys.argv[1], sys.argv[2], n_gold=int(sys.argv[3]), n_other=int(sys.argv[4]))
print(f"{n} sources, gold {gold}")
PY

OUT="$WORK/mined.pre.b$BEAM.g$GOLD_N.o$OTHER_N.tsv"
MINE=("$BIN/trie-mine" --pre-expansion --model "$MODEL" --source "$WORK/zh-en.slice.zh"
      --target "$WORK/zh-en.slice.en" -o "$OUT" --beam "$BEAM" --nbest 1)
echo "== trie-mine --pre-expansion --beam $BEAM"
# An earlier run of the same settings is resumed (a no-op when it finished); one with other
# settings (e.g. a re-imported model) is refused by trie-mine, and the demo then starts over.
if [ -f "$OUT.progress" ] && "${MINE[@]}" --resume; then
    :
else
    time "${MINE[@]}"
fi

echo "== evaluation: one target per source, per-word cross-entropy filter"
"$BIN/trie-mine-eval" "$OUT" --gold "$WORK/zh-en.slice.gold" --filter ce --folds 2
