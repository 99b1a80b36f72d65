#!/usr/bin/env bash
# Side-by-side benchmark (not a test): PyTorch's DistributedDataParallel and DDP +
# ZeroRedundancyOptimizer (ZeRO-1), run by bench/torch_peer_bench.py on Debian's python3-torch
# (installed here when missing), against deepshard ZeRO stages 0-3, 2 ranks on this machine, with
# the same workload on both sides: GPT-2 model (tanh GELU, tied head, biases), 8 sequences per rank,
# AdamW lr 1e-3 betas 0.9/0.95 eps 1e-8 weight decay 0.1 on matrices, WarmupCosineLR (20 warmup
# steps, min ratio 0.1), gradient clipping 1.0, fp32 or bf16 (PyTorch: autocast with fp32 master
# weights; deepshard: bf16 model with fp32 master weights), the threads `deepshard launch` sets
# (cores / ranks, OMP_WAIT_POLICY=PASSIVE, OPENBLAS_CORETYPE as inherited). Statistic on both sides:
# global tokens/s at the median step time after the same warm-up steps; each configuration runs
# --repeat times, round-robin (run 1 of every configuration, then run 2, ...), and the median run
# is reported. Models: "peer" (the peer study's GPT: 4 layers, 4 heads, 256 wide, block 128) and
# "small" (deepshard's preset: 6 x 6 x 384, block 256). py0..py3: deepshard's engines from Python
# (`import deepshard`, docs/python.md) at that ZeRO stage training the peers' own PyTorch model on
# the peers' data and ranks (bench/torch_peer_bench.py --mode deepshardN): the Python side-by-side
# (`--impl ddp --impl zero1 --impl py0 --impl py1 --impl py2 --impl py3`), whose stage ratios are
# against py0; py0k..py3k the same with the model's LayerNorm, GELU and attention modules (and
# Linear where the ranks measure it faster) on deepshard's fused kernels
# (`initialize(kernel_inject=True)`, --kernels), their ratios against
# py0k; py3b and py3kb stage 3 with each transformer block one unit (--block-units:
# deepshard.utils.set_z3_leaf_modules by the block's class, FSDP's auto-wrap policy), against py0
# and py0k. Prints a markdown table for docs/benchmarks.md, with the machine, date, command, load and
# each configuration's peak resident memory (the largest rank's, of the median run).
# --isa avx512|avx2|scalar runs both sides on one CPU path, as on a CPU whose best level it is
# (scripts/isa_env.sh, shared with scripts/test.sh: deepshard's kernels, OpenBLAS's core, libtorch's
# and oneDNN's kernels, and below avx512 bf16 without bf16 arithmetic: deepshard computes bf16 in
# fp32, the peers' autocast runs libtorch's generic bf16 GEMM); the table's header names it.
# Usage: scripts/bench_peers.sh [--repeat R] [--steps S] [--warmup W] [--model peer|small]...
#                               [--dtype fp32|bf16]... [--impl ddp|zero1|z0..z3|py0..py3|py0k..py3k|py3b|py3kb]...
#                               [--isa LEVEL] [--no-build]
# (defaults: 3 repeats, 30 steps, 5 warm-up, both models, both dtypes, all six implementations,
# each library's own choice of path; --no-build uses $BUILD_DIR/deepshard as it is). About an hour
# on 2 idle cores with the defaults.
set -euo pipefail
cd "$(dirname "$0")/.."
repeat=3; steps=30; warmup=5; models=(); dtypes=(); impls=(); build=1; isa=""
while [ $# -gt 0 ]; do
  case "$1" in
    --repeat) repeat="$2"; shift 2 ;;
    --steps) steps="$2"; shift 2 ;;
    --warmup) warmup="$2"; shift 2 ;;
    --model) models+=("$2"); shift 2 ;;
    --dtype) dtypes+=("$2"); shift 2 ;;
    --impl) impls+=("$2"); shift 2 ;;
    --isa) isa="$2"; shift 2 ;;
    --no-build) build=0; shift ;;
    *) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2 ;;
  esac
done
[ ${#models[@]} -gt 0 ] || models=(peer small)
[ ${#dtypes[@]} -gt 0 ] || dtypes=(fp32 bf16)
[ ${#impls[@]} -gt 0 ] || impls=(ddp zero1 z0 z1 z2 z3)
[ "$steps" -gt "$warmup" ] || { echo "bench_peers: --steps must exceed --warmup" >&2; exit 2; }
world=2; batch=8
isa_peer_args=()
isa_line="none (each library's own choice)"
if [ -n "$isa" ]; then
  # shellcheck source=scripts/isa_env.sh
  source scripts/isa_env.sh
  force_isa "$isa"
fi

# The peer needs Debian's torch (python3-torch, 1.13.1) and its own interpreter.
py=/usr/bin/python3
if ! "$py" -c 'import torch' 2>/dev/null; then
  echo "bench_peers: installing python3-torch (the PyTorch peer)" >&2
  sudo_cmd=""; [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -q --no-install-recommends python3-torch ||
    { $sudo_cmd apt-get update -q &&
      DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -q --no-install-recommends python3-torch; }
fi
[ "$build" = 0 ] || scripts/setup.sh >/dev/null
build_dir="${BUILD_DIR:-build}"
ds="$build_dir/deepshard"
DEEPSHARD="$ds" scripts/fetch_brown.sh data >/dev/null
out_dir="$(mktemp -d)"
trap 'rm -rf "$out_dir"' EXIT

# The peers run with the OpenBLAS kernels deepshard's ranks get (the launcher's choice: the user's
# OPENBLAS_CORETYPE, or the matching core when OpenBLAS fell back to a generic one), so both sides
# multiply with the same kernels.
peer_coretype=$("$ds" launch -n 1 -- /bin/sh -c 'echo "coretype=<${OPENBLAS_CORETYPE:-}>"' 2>/dev/null |
  sed -n 's/.*coretype=<\(.*\)>.*/\1/p' | head -1)
peer_env=()
[ -z "$peer_coretype" ] || peer_env=("OPENBLAS_CORETYPE=$peer_coretype")

peer_model_args() {  # model -> bench/torch_peer_bench.py shape options
  case "$1" in
    peer) echo "--n-layer 4 --n-head 4 --n-embd 256 --block 128" ;;
    small) echo "--n-layer 6 --n-head 6 --n-embd 384 --block 256" ;;
    *) echo "unknown model $1" >&2; exit 2 ;;
  esac
}
ds_model_sets() {  # model -> deepshard --set arguments (examples/gpt-brown.json is `small`)
  case "$1" in
    peer) echo "model.n_layer=4 model.n_head=4 model.n_embd=256 model.block_size=128" ;;
    small) echo "model.preset=small" ;;
  esac
}
block_of() { case "$1" in peer) echo 128 ;; small) echo 256 ;; esac; }

json_number() { sed -n "s/^ *\"$2\": \\([-0-9.e+]*\\),\\?$/\\1/p" "$1" | head -1; }

# One run -> "$out_dir/<model>-<dtype>-<impl>-<i>.result": "tokens/s mfu".
run_one() {
  local model="$1" dtype="$2" impl="$3" i="$4" name="$1-$2-$3-$4"
  local log="$out_dir/$name.log"
  case "$impl" in
    ddp | zero1 | py[0-3] | py[0-3]k | py3b | py3kb)
      local mode="$impl" flags=()
      [ "${impl#py}" = "$impl" ] || mode="deepshard${impl:2:1}"
      [ "${impl#py?k}" = "$impl" ] || flags=(--kernels)
      [ "${impl%b}" = "$impl" ] || flags+=(--block-units)
      # shellcheck disable=SC2046
      env "${peer_env[@]}" PYTHONPATH="$build_dir/python${PYTHONPATH:+:$PYTHONPATH}" \
        "$py" bench/torch_peer_bench.py --mode "$mode" "${flags[@]}" --world "$world" --batch "$batch" \
        "${isa_peer_args[@]}" --dtype "$dtype" --steps "$steps" --warmup "$warmup" $(peer_model_args "$model") >"$log" 2>&1 ||
        { echo "bench_peers: $name failed:" >&2; tail -20 "$log" >&2; exit 1; }
      sed -n 's/^RESULT .*"tokens_per_s": \([0-9.e+]*\).*"peak_rss_bytes": \([0-9]*\).*/\1 - \2/p' \
        "$log" >"$out_dir/$name.result"
      ;;
    z[0-3])
      local run_dir="$out_dir/$name"
      local sets=(--set "train.steps=$steps" --set train.sample_tokens=0
        --set train.eval_interval=0 --set data.valid= --set "train_micro_batch_size_per_gpu=$batch"
        --set train.log_interval=1000 --set wall_clock_breakdown=true --set "zero_optimization.stage=${impl#z}"
        --set "train.run_dir=$run_dir")
      for kv in $(ds_model_sets "$model"); do sets+=(--set "$kv"); done
      [ "$dtype" = bf16 ] && sets+=(--set bf16.enabled=true)
      "$ds" launch -n "$world" -- "$ds" train --config examples/gpt-brown.json "${sets[@]}" \
        >"$log" 2>&1 || { echo "bench_peers: $name failed:" >&2; tail -20 "$log" >&2; exit 1; }
      # The same statistic as the peer: median step time over the steps after the warm-up.
      local median
      median=$(sed -n 's/.*"step_time_s":\([0-9.e+-]*\).*/\1/p' "$run_dir/metrics.jsonl" |
        tail -n +"$((warmup + 1))" | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}')
      local mfu peak
      mfu=$(json_number "$run_dir/summary.json" mfu)
      peak=$(json_number "$run_dir/summary.json" matmul_peak_gflops_per_rank)
      # The machine as the ranks saw it (CPU, ISA, OpenBLAS core and why), from the first run.
      [ -s "$out_dir/platform.txt" ] || "$py" -c 'import json, sys
p = json.load(open(sys.argv[1]))["platform"]
print("CPU %s (ISA %s), OpenBLAS core %s, OPENBLAS_CORETYPE=%s (%s), %s intra-op thread(s) per rank, oneDNN %s, "
      "bf16 compute %s (%s)"
      % (p["cpu"], p["isa"], p["openblas_core"], p["openblas_coretype"] or "unset", p["blas"],
         p["intra_op_threads"], p["onednn"], p["bf16_compute"], p["bf16_compute_reason"]))' "$run_dir/summary.json" >"$out_dir/platform.txt"
      echo "${peak:-0}" >"$out_dir/peak-$dtype-$model-$impl-$i.txt"
      local rss
      rss=$("$py" -c 'import json, sys; print(max(json.load(open(sys.argv[1]))["peak_rss_bytes"]))' \
        "$run_dir/summary.json")
      awk -v m="$median" -v t="$((world * batch * $(block_of "$model")))" -v f="${mfu:--}" -v r="$rss" \
        'BEGIN {printf "%.1f %s %s\n", t / m, f, r}' >"$out_dir/$name.result"
      ;;
    *) echo "unknown implementation $impl" >&2; exit 2 ;;
  esac
}

load_before="$(cut -d' ' -f1-3 /proc/loadavg)"
commit="$(git rev-parse --short HEAD 2>/dev/null || echo '?')"  # at the start: a merge may move HEAD
started="$(date -u '+%Y-%m-%d %H:%M UTC')"
for i in $(seq 1 "$repeat"); do
  for model in "${models[@]}"; do
    for dtype in "${dtypes[@]}"; do
      for impl in "${impls[@]}"; do run_one "$model" "$dtype" "$impl" "$i"; done
    done
  done
done
load_after="$(cut -d' ' -f1-3 /proc/loadavg)"

median_of() {  # configuration -> "tokens/s mfu rss runs" of the median run (by tokens/s)
  local sorted
  sorted=$(cat "$out_dir/$1-"[0-9]*.result | sort -g)
  echo "$(echo "$sorted" | sed -n "$(( (repeat + 1) / 2 ))p") $(echo "$sorted" | awk '{printf "%s%.0f", (NR>1?"/":""), $1}')"
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (b > 0) printf "%.2fx", a / b; else print "-"}'; }

cpu="$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)"
echo "Measured $started by \`scripts/bench_peers.sh --repeat $repeat --steps $steps --warmup $warmup${isa:+ --isa $isa}\`"
echo "on $cpu ($(nproc) cores), $("$py" -c 'import torch; print("torch", torch.__version__)' 2>/dev/null),"
echo "deepshard $commit, OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset},"
echo "forced ISA (both sides): $isa_line;"
if [ ${#isa_peer_args[@]} -gt 0 ]; then peer_bf16="libtorch's generic bf16 GEMM (oneDNN off, as without AVX-512)"
else peer_bf16="libtorch's choice (oneDNN where the CPU has AVX-512)"; fi
echo "precision: fp32; bf16 = deepshard's bf16 model with fp32 master weights (bf16 compute: ${DEEPSHARD_BF16_COMPUTE:-auto}),"
echo "PyTorch's autocast bf16 with fp32 master weights on $peer_bf16;"
echo "$world ranks x $batch sequences, $steps steps (median step after $warmup), median of $repeat runs;"
echo "load average (1/5/15 min) before: $load_before, after: $load_after."
[ -s "$out_dir/platform.txt" ] && echo "deepshard's ranks: $(cat "$out_dir/platform.txt")."
echo "PyTorch peers: OPENBLAS_CORETYPE=${peer_coretype:-unset} (the kernels deepshard's ranks get)."
for dtype in "${dtypes[@]}"; do
  peak=$(cat "$out_dir"/peak-"$dtype"-*.txt 2>/dev/null | sort -g | tail -1 || true)  # none without z0..z3
  [ -z "$peak" ] || printf 'Matmul peak per rank (%s, measured by rank 0 after each run as `deepshard doctor` does; highest of the runs): %.1f GFLOP/s. MFU = achieved / that run'"'"'s peak (summary.json).\n' "$dtype" "$peak"
done
echo
echo "| model | dtype | implementation | tokens/s | runs | vs PyTorch DDP | vs PyTorch ZeRO-1 | vs deepshard stage 0 | MFU | peak RSS (MiB) |"
echo "|---|---|---|---|---|---|---|---|---|---|"
for model in "${models[@]}"; do
  for dtype in "${dtypes[@]}"; do
    ddp=0; zero1=0; z0=0; py0=0; py0k=0
    for impl in "${impls[@]}"; do
      read -r tps mfu rss runs <<<"$(median_of "$model-$dtype-$impl")"
      case "$impl" in
        ddp) ddp=$tps ;; zero1) zero1=$tps ;; z0) z0=$tps ;; py0) py0=$tps ;; py0k) py0k=$tps ;;
      esac
    done
    for impl in "${impls[@]}"; do
      read -r tps mfu rss runs <<<"$(median_of "$model-$dtype-$impl")"
      case "$impl" in
        ddp) label="PyTorch DDP"; vs_ddp="1.00x"; vs_zero1="-"; vs_z0="-" ;;
        zero1) label="PyTorch DDP + ZeroRedundancyOptimizer"; vs_ddp="-"; vs_zero1="1.00x"; vs_z0="-" ;;
        z* | py*)
          impl_stage="${impl#?}"; impl_stage="${impl_stage#y}"; impl_stage="${impl_stage:0:1}"
          own0=$z0; label="deepshard stage $impl_stage"
          [ "${impl#py}" = "$impl" ] || { own0=$py0; label="deepshard stage $impl_stage from Python"; }
          [ "${impl#py?k}" = "$impl" ] || { own0=$py0k; label="$label, fused kernels"; }
          [ "${impl%b}" = "$impl" ] || label="$label, a unit per block"
          vs_z0=$(ratio "$tps" "$own0")
          vs_ddp=$([ "$impl_stage" = 0 ] && ratio "$tps" "$ddp" || echo "-")
          vs_zero1=$([ "$impl_stage" = 1 ] && ratio "$tps" "$zero1" || echo "-") ;;
      esac
      mfu_text=$(awk -v m="$mfu" 'BEGIN {if (m == "-") print "-"; else printf "%.0f %%", 100 * m}')
      printf '| %s | %s | %s | %.0f | %s | %s | %s | %s | %s | %.0f |\n' "$model" "$dtype" "$label" "$tps" \
        "$runs" "$vs_ddp" "$vs_zero1" "$vs_z0" "$mfu_text" "$(awk -v r="$rss" 'BEGIN {print r / 1048576}')"
    done
  done
done
