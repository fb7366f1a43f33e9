#!/usr/bin/env bash
# The main job on the shared default (run through `make demo`, which builds .venv and imports the
# shared OPUS-MT model first), for the default configuration (judge: the learned judge, cut at
# prob >= 0.5) and for combined (the fixed combined score, its threshold tuned on the sample):
#   1. mine the whole BUCC 2018 zh-en sample (8,624 zh, 13,589 en): multilingual USE
#      ratio-margin candidates, every pair scored exactly by the OPUS-MT model, one judge;
#   2. evaluate it one-to-one: the cut tuned on the sample's gold (optimistic) and 2-fold
#      held-out, then at the configuration's shipped cut (the judge's is a transfer figure:
#      it was fitted on the training split only; combined's was tuned on this sample);
#   3. mine the transfer set (shared/data/devsets/zh-en: unseen news-like data) and evaluate
#      it at the shipped cut (a transfer figure for both).
# Knobs (environment): DEMO_DIR=$TRIEMINE_CACHE/demo, DEMO_TRANSFER=1 (0 skips step 3),
# DEMO_CONFIGS="judge combined" (the configurations, in order), DEMO_ARGS (extra trie-mine
# arguments; "--beam 5" with DEMO_CONFIGS=paper and DEMO_EVAL="--filter ce" for
# the paper's). trie-mine-eval picks the selection rule and filter that fit the TSV (and, with
# --thresholds, the file's own). Rerunning resumes a mining run.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=.venv/bin
SHARED=${TRIEMINE_SHARED:-$(cd .. && pwd)/shared}
CACHE=${TRIEMINE_CACHE:-$PWD/.cache}
MODEL=${MODEL:-$CACHE/models/opus-mt-zh-en}
WORK=${DEMO_DIR:-$CACHE/demo}
EVAL_ARGS=${DEMO_EVAL:-}
mkdir -p "$WORK"
[ -f "$MODEL/checkpoint.pt" ] || "$BIN/trie-mine-import" -o "$MODEL"

mine() {  # mine CONFIG SOURCE TARGET OUT: resume an earlier run of the same settings, else anew
    local cmd=("$BIN/trie-mine" --model "$MODEL" --config "$1" --source "$2" --target "$3"
               -o "$4" ${DEMO_ARGS:-})
    echo "== ${cmd[*]}"
    if { [ -e "$4.work" ] || [ -e "$4.progress" ]; } && "${cmd[@]}" --resume; then
        return 0
    fi
    time "${cmd[@]}"
}

SAMPLE=$SHARED/data/bucc2018/zh-en/zh-en.sample
DEV=$SHARED/data/devsets/zh-en/zh-en.dev
for config in ${DEMO_CONFIGS:-judge combined}; do
    mine "$config" "$SAMPLE.zh" "$SAMPLE.en" "$WORK/$config.sample.tsv"
    echo "== $config on the sample: tuned on its gold (optimistic) and 2-fold held-out" \
         "${EVAL_ARGS:+($EVAL_ARGS)}"
    "$BIN/trie-mine-eval" "$WORK/$config.sample.tsv" --gold "$SAMPLE.gold" $EVAL_ARGS --folds 2 \
        --report "$WORK/$config.sample.report.html"
    echo "== $config on the sample at its shipped cut"
    "$BIN/trie-mine-eval" "$WORK/$config.sample.tsv" --gold "$SAMPLE.gold" $EVAL_ARGS \
        --thresholds shipped
    if [ "${DEMO_TRANSFER:-1}" != 0 ]; then
        mine "$config" "$DEV.zh" "$DEV.en" "$WORK/$config.transfer.tsv"
        echo "== $config on the transfer set at its shipped cut (never tuned on)"
        "$BIN/trie-mine-eval" "$WORK/$config.transfer.tsv" --gold "$DEV.gold" $EVAL_ARGS \
            --thresholds shipped
    fi
    echo "report: $WORK/$config.sample.report.html"
done
