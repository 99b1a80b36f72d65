#!/usr/bin/env bash
# An emulated cluster on one machine: K "nodes", each a network namespace <name>n<i> with address
# <subnet>.<i+1>/24, joined through a bridge that lives in its own namespace <name>sw (nothing is
# added to the host's own network). Each node's link is a veth pair shaped with tc tbf in both
# directions (node -> bridge and bridge -> node). Commands run on a node inside its namespace and
# in new UTS and IPC namespaces with a /dev/shm of their own (hostname node<i>, its own shared
# memory): to deepshard the nodes are separate hosts. Root only. netem (delay, loss) is not built into every kernel: `up` says
# whether it is available here.
#
#   scripts/cluster.sh up NAME K [--subnet 10.231.7] [--rate 1gbit] [--burst 256kb]
#   scripts/cluster.sh shape NAME I RATE [BURST]       # node I's link (both directions)
#   scripts/cluster.sh link NAME I up|down              # cut or restore node I's link
#   scripts/cluster.sh exec NAME I -- COMMAND...        # run COMMAND on node I
#   scripts/cluster.sh addr NAME I                      # node I's address
#   scripts/cluster.sh down NAME                        # remove every namespace of NAME
#   scripts/cluster.sh run K M [--rate R] [--burst B] [--subnet S] -- COMMAND...
#       up, then `deepshard launch -n M --nnodes K --node-rank I --master-addr <node 0>` on every
#       node running COMMAND, wait for all of them, always tear down (trap on EXIT); exit status:
#       the first non-zero launcher status, else 0. DEEPSHARD (default build/deepshard) names the
#       binary; DEEPSHARD_JOB_TOKEN is made up when not set; MASTER_PORT defaults to 29500.
#
# NAME: letters and digits, at most 8 characters (interface names are short). Subnet default:
# 10.231.<a number derived from NAME>, so that clusters of different names differ.
set -euo pipefail

die() {
  echo "cluster.sh: $*" >&2
  exit 2
}

need_tools() {
  [ "$(id -u)" = 0 ] || die "needs root (network namespaces); run as root or with sudo"
  for tool in ip tc unshare hostname; do
    command -v "$tool" >/dev/null || die "'$tool' is not installed (iproute2, util-linux)"
  done
}

check_name() {
  [[ "$1" =~ ^[A-Za-z0-9]{1,8}$ ]] || die "cluster name '$1' must be 1-8 letters or digits"
}

node_ns() { echo "${1}n${2}"; }
switch_ns() { echo "${1}sw"; }

default_subnet() { echo "10.231.$(($(printf '%s' "$1" | cksum | cut -d' ' -f1) % 250 + 1))"; }

# The subnet recorded by `up` (a file in /run so that exec/addr/down find it).
state_file() { echo "/run/deepshard-cluster-$1"; }
subnet_of() {
  [ -f "$(state_file "$1")" ] || die "no cluster named '$1' (run: cluster.sh up $1 K)"
  sed -n 's/^subnet=//p' "$(state_file "$1")"
}
nodes_of() {
  subnet_of "$1" >/dev/null
  sed -n 's/^nodes=//p' "$(state_file "$1")"
}

check_node() {
  local name=$1 i=$2 k
  k="$(nodes_of "$name")"
  [[ "$i" =~ ^[0-9]+$ ]] && [ "$i" -lt "$k" ] ||
    die "node '$i' is not in [0, $k) of cluster '$name'"
}

# tbf on both ends of node I's link: node egress (inside the node) and bridge egress (toward it).
# The bucket (default 256 kB) holds a whole 64 kB GSO packet with its headers: a smaller one makes
# tbf cut every such packet into MTU-sized frames in software, kernel CPU that a real NIC's
# segmentation offload spares its host (measured: 4 nodes at 1 Gbit/s on the 2 shared cores ran
# 7 % slower with a 64 kB bucket, docs/benchmarks.md). Both keep the rate: 96 Mbit/s and
# 950-960 Mbit/s measured through either.
default_burst=256kb
shape() {
  local name=$1 i=$2 rate=$3 burst=${4:-$default_burst}
  for end in "$(node_ns "$name" "$i") eth0" "$(switch_ns "$name") p$i"; do
    set -- $end
    ip netns exec "$1" tc qdisc replace dev "$2" root tbf rate "$rate" burst "$burst" latency 100ms ||
      die "tc tbf rate $rate burst $burst on $2 in $1 failed"
  done
}

netem_available() {
  local ns
  ns="$(switch_ns "$1")"
  if ip -n "$ns" link add nmtest type dummy 2>/dev/null &&
    ip netns exec "$ns" tc qdisc add dev nmtest root netem delay 1ms 2>/dev/null; then
    ip -n "$ns" link del nmtest
    return 0
  fi
  ip -n "$ns" link del nmtest 2>/dev/null || true
  return 1
}

cmd_up() {
  local name=$1 k=$2
  shift 2
  local subnet rate="" burst=$default_burst
  subnet="$(default_subnet "$name")"
  while [ $# -gt 0 ]; do
    case $1 in
      --subnet) subnet=$2; shift 2 ;;
      --rate) rate=$2; shift 2 ;;
      --burst) burst=$2; shift 2 ;;
      *) die "up: unknown option '$1'" ;;
    esac
  done
  check_name "$name"
  [[ "$k" =~ ^[0-9]+$ ]] && [ "$k" -ge 1 ] && [ "$k" -le 200 ] || die "K must be in [1, 200], got '$k'"
  [[ "$subnet" =~ ^10\.[0-9]+\.[0-9]+$ ]] || die "--subnet must look like 10.231.7, got '$subnet'"
  [ ! -e "$(state_file "$name")" ] || die "cluster '$name' exists already (cluster.sh down $name)"
  printf 'subnet=%s\nnodes=%s\n' "$subnet" "$k" >"$(state_file "$name")"
  trap "cmd_down $name" EXIT # a failure half-way removes what was made (name: letters and digits)
  local sw
  sw="$(switch_ns "$name")"
  ip netns add "$sw" || die "ip netns add $sw failed (is 'ip netns' allowed here?)"
  ip -n "$sw" link set lo up
  ip -n "$sw" link add br0 type bridge || die "cannot create a bridge in $sw (bridge module?)"
  ip -n "$sw" link set br0 up
  for ((i = 0; i < k; i++)); do
    local ns
    ns="$(node_ns "$name" "$i")"
    ip netns add "$ns"
    ip -n "$ns" link set lo up
    ip link add "${name}v$i" netns "$ns" type veth peer name "p$i" netns "$sw"
    ip -n "$ns" link set "${name}v$i" name eth0
    ip -n "$ns" addr add "$subnet.$((i + 1))/24" dev eth0
    ip -n "$ns" link set eth0 up
    ip -n "$sw" link set "p$i" master br0
    ip -n "$sw" link set "p$i" up
    [ -z "$rate" ] || shape "$name" "$i" "$rate" "$burst"
  done
  [ -n "${in_run:-}" ] || trap - EXIT
  local netem="not available in this kernel (no delay or loss emulation; tbf rate shaping only)"
  netem_available "$name" && netem="available"
  echo "cluster $name: $k nodes ${name}n0..${name}n$((k - 1)), $subnet.1-$subnet.$k," \
    "links ${rate:-unshaped}${rate:+ (tbf burst $burst)}; netem $netem"
}

cmd_down() {
  local name=$1 ns
  check_name "$name"
  for ns in $(ip netns list | awk '{print $1}' | grep -E "^${name}(n[0-9]+|sw)$" || true); do
    ip netns pids "$ns" 2>/dev/null | xargs -r kill -9 2>/dev/null || true
    ip netns del "$ns" 2>/dev/null || true
  done
  rm -f "$(state_file "$name")"
}

cmd_exec() {
  local name=$1 i=$2
  shift 2
  [ "${1:-}" = "--" ] && shift
  [ $# -gt 0 ] || die "exec: no command"
  check_node "$name" "$i"
  # `ip netns exec` gives the command its own mount namespace: a fresh /dev/shm there keeps the
  # node's POSIX shared memory its own (the IPC namespace covers System V IPC only).
  exec ip netns exec "$(node_ns "$name" "$i")" unshare --uts --ipc \
    sh -c 'hostname "$0" && mount -t tmpfs -o mode=1777 nodeshm /dev/shm && exec "$@"' "node$i" "$@"
}

cmd_link() {
  local name=$1 i=$2 state=$3
  check_node "$name" "$i"
  [ "$state" = up ] || [ "$state" = down ] || die "link: expected up or down, got '$state'"
  ip -n "$(switch_ns "$name")" link set "p$i" "$state"
}

cmd_run() {
  local k=$1 m=$2
  shift 2
  local up_args=()
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do
    case $1 in
      --rate | --burst | --subnet) up_args+=("$1" "$2"); shift 2 ;;
      *) die "run: unknown option '$1' (the command goes after '--')" ;;
    esac
  done
  [ "${1:-}" = "--" ] || die "run: missing '--' before the command"
  shift
  [ $# -gt 0 ] || die "run: no command"
  local name="dsc$$"
  name=${name:0:8}
  local ds="${DEEPSHARD:-build/deepshard}"
  [ -x "$ds" ] || die "$ds is not an executable (set DEEPSHARD)"
  ds="$(cd "$(dirname "$ds")" && pwd)/$(basename "$ds")"
  in_run=1
  trap "cmd_down $name" EXIT
  cmd_up "$name" "$k" "${up_args[@]}"
  export DEEPSHARD_JOB_TOKEN="${DEEPSHARD_JOB_TOKEN:-$(head -c16 /dev/urandom | od -An -tx1 | tr -d ' \n')}"
  local master
  master="$(subnet_of "$name").1"
  local pids=()
  for ((i = 0; i < k; i++)); do
    "$0" exec "$name" "$i" -- "$ds" launch -n "$m" --nnodes "$k" --node-rank "$i" \
      --master-addr "$master" --master-port "${MASTER_PORT:-29500}" -- "$@" &
    pids+=($!)
  done
  local status=0
  for pid in "${pids[@]}"; do
    local s=0
    wait "$pid" || s=$?
    [ "$status" != 0 ] || status=$s
  done
  return "$status"
}

[ $# -ge 1 ] || die "usage: cluster.sh up|down|exec|shape|link|addr|run ... (see the top of $0)"
command=$1
shift
need_tools
case $command in
  up) [ $# -ge 2 ] || die "usage: cluster.sh up NAME K [--subnet S] [--rate R] [--burst B]"; cmd_up "$@" ;;
  down) [ $# -eq 1 ] || die "usage: cluster.sh down NAME"; cmd_down "$1" ;;
  exec) [ $# -ge 3 ] || die "usage: cluster.sh exec NAME I -- COMMAND..."; cmd_exec "$@" ;;
  shape)
    [ $# -ge 3 ] || die "usage: cluster.sh shape NAME I RATE [BURST]"
    check_node "$1" "$2"
    shape "$@"
    ;;
  link) [ $# -eq 3 ] || die "usage: cluster.sh link NAME I up|down"; cmd_link "$@" ;;
  addr) [ $# -eq 2 ] || die "usage: cluster.sh addr NAME I"; check_node "$1" "$2"; echo "$(subnet_of "$1").$(($2 + 1))" ;;
  run) [ $# -ge 3 ] || die "usage: cluster.sh run K M [--rate R] -- COMMAND..."; cmd_run "$@" ;;
  *) die "unknown command '$command' (up, down, exec, shape, link, addr, run)" ;;
esac
