#!/usr/bin/env bash
# End-to-end training benchmark (not a test): tokens/s and peak RSS per rank of `deepshard train`
# on the Brown corpus, each case repeated and reported as the median run. Prints a markdown table
# for docs/benchmarks.md. Usage: scripts/bench.sh [--repeat R] [--steps S] [--case NAME]...
# Cases: small-n1 small-n2 peer-n2 (default), gpt2-n2 (the gpt2 preset, block 128, 2 sequences
# per rank); any case + "-zS" runs ZeRO stage S (e.g. small-n2-z3), + "-bf16" runs it in bf16
# (e.g. small-n2-z2-bf16, gpt2-n2-z3-bf16), + "-gloo" / "-shm" picks the comm transport (default
# auto: shared memory on one host), e.g. gpt2-n2-z0-bf16-gloo. 3D layouts at an equal global batch
# (docs/parallel.md): gpt2-n4 (4 data-parallel ranks, 2 sequences each), + "-tp2" splits the model
# over 2 tensor ranks (twice the sequences per data-parallel rank), + "-pp2" over 2 pipeline stages
# (1F1B over 4 micro-batches of half the size), e.g. gpt2-n4-tp2-z1, gpt2-n4-pp2-z1,
# gpt2-n4-tp2-pp2-z1.
# peer-* use the model of bench/peers (torch_peer_bench.py), for side-by-side comparison with PyTorch DDP / ZeRO-1.
set -euo pipefail
cd "$(dirname "$0")/.."
repeat=3; steps=30; cases=()
while [ $# -gt 0 ]; do
  case "$1" in
    --repeat) repeat="$2"; shift 2 ;;
    --steps) steps="$2"; shift 2 ;;
    --case) cases+=("$2"); shift 2 ;;
    *) echo "usage: scripts/bench.sh [--repeat R] [--steps S] [--case NAME]..." >&2; exit 2 ;;
  esac
done
[ ${#cases[@]} -gt 0 ] || cases=(small-n1 small-n2 peer-n2)
source scripts/bench_common.sh
bench_brown_setup  # ds (built by scripts/setup.sh when missing), the Brown corpus, out_dir

# case name -> "ranks micro extra --set arguments"; "peer" is the model of bench/peers (torch_peer_bench.py).
peer="model.n_layer=4 model.n_head=4 model.n_embd=256 model.block_size=128"
case_args() {
  case "$1" in
    *-bf16) echo "$(case_args "${1%-bf16}") bf16.enabled=true" ;;
    *-gloo) echo "$(case_args "${1%-gloo}") comm.transport=gloo" ;;
    *-shm) echo "$(case_args "${1%-shm}") comm.transport=shm" ;;
    *-z[0-3]) echo "$(case_args "${1%-z?}") zero_optimization.stage=${1##*-z}" ;;
    *-tp2) read -r r m x <<<"$(case_args "${1%-tp2}")"
           echo "$r $((m * 2)) $x tensor_parallel.enabled=true tensor_parallel.size=2" ;;
    *-pp2) read -r r m x <<<"$(case_args "${1%-pp2}")"
           echo "$r $((m / 2)) $x pipeline.enabled=true pipeline.stages=2 gradient_accumulation_steps=4" ;;
    small-n1) echo "1 16" ;;
    small-n2) echo "2 8" ;;
    peer-n2) echo "2 8 $peer" ;;
    gpt2-n2) echo "2 2 model.preset=gpt2 model.block_size=128" ;;
    gpt2-n4) echo "4 2 model.preset=gpt2 model.block_size=128" ;;
    *) echo "unknown case $1" >&2; exit 2 ;;
  esac
}

json_number() { sed -n "s/^ *\"$2\": \\([-0-9.e+]*\\),\\?$/\\1/p" "$1" | head -1; }
# A number of summary.json's "pipeline" section (absent without a pipeline: "-").
json_pipeline_number() {
  local v
  v=$(sed -n "/\"pipeline\": {/,/}/s/^ *\"$2\": \([-0-9.e+]*\),\?$/\1/p" "$1" | head -1)
  echo "${v:--}"
}
json_array() { tr -d '\n ' < "$1" | sed -n "s/.*\"$2\":\\[\\([0-9,]*\\)\\].*/\\1/p"; }

# Repeats run round-robin over the cases (run 1 of every case, then run 2, ...), so a change of
# machine load during the benchmark touches every case alike.
run_case() {  # case, repeat index -> "tokens/s rss params wait bubble pipeline-wait" into $out_dir/<case>-<i>.result
  local c="$1" i="$2" ranks micro extra
  read -r ranks micro extra <<<"$(case_args "$c")"
  local sets=(--set "train.steps=$steps" --set train.sample_tokens=0 --set train.eval_interval=0
        --set data.valid= --set "train_micro_batch_size_per_gpu=$micro" --set train.log_interval=1000)
  for kv in $extra; do sets+=(--set "$kv"); done
  local run_dir="$out_dir/$c-$i"
  "$ds" launch -n "$ranks" -- "$ds" train --config examples/gpt-brown.json "${sets[@]}" \
    --set "train.run_dir=$run_dir" >"$out_dir/$c-$i.log" 2>&1 ||
    { echo "case $c run $i failed:" >&2; tail -20 "$out_dir/$c-$i.log" >&2; exit 1; }
  echo "$(json_number "$run_dir/summary.json" mean_tokens_per_s)" \
    "$(json_array "$run_dir/summary.json" peak_rss_bytes)" \
    "$(json_number "$run_dir/summary.json" num_parameters)" \
    "$(json_number "$run_dir/summary.json" comm_wait_share)" \
    "$(json_pipeline_number "$run_dir/summary.json" bubble_fraction)" \
    "$(json_pipeline_number "$run_dir/summary.json" comm_wait_share)" >"$out_dir/$c-$i.result"
}
for c in "${cases[@]}"; do case_args "$c" >/dev/null; done  # unknown cases fail before any run
for i in $(seq 1 "$repeat"); do
  for c in "${cases[@]}"; do run_case "$c" "$i"; done
done

echo "| case | ranks | micro/rank | tokens/s (median of $repeat) | runs | comm wait share | pipeline bubble / wait share | peak RSS/rank MiB | params |"
echo "|---|---|---|---|---|---|---|---|---|"
for c in "${cases[@]}"; do
  read -r ranks micro extra <<<"$(case_args "$c")"
  sorted=$(cat "$out_dir/$c-"[0-9]*.result | sort -n)
  median=$(echo "$sorted" | sed -n "$(( (repeat + 1) / 2 ))p")
  read -r tps rss params wait bubble pwait <<<"$median"
  runs=$(echo "$sorted" | awk '{printf "%s%.0f", (NR>1?", ":""), $1}')
  rss_mib=$(echo "$rss" | tr ',' '\n' | awk '{printf "%s%.0f", (NR>1?"/":""), $1/1048576}')
  pipe="-"
  [ "$bubble" = "-" ] || pipe=$(awk -v b="$bubble" -v w="$pwait" 'BEGIN{printf "%.0f %% / %.0f %%", 100*b, 100*w}')
  printf '| %s | %s | %s | %.0f | %s | %.0f %% | %s | %s | %s |\n' "$c" "$ranks" "$micro" "$tps" "$runs" \
    "$(awk -v w="$wait" 'BEGIN{print 100*w}')" "$pipe" "$rss_mib" "$params"
done
