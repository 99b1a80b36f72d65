#!/usr/bin/env bash
# The main job: installs what is missing and builds the `deepshard` executable alone (the test
# suite's build is scripts/test.sh's), fetches and prepares the Brown corpus, then
# trains the `small` GPT on it with 2 ranks (examples/gpt-brown.json), prints a text sample, and
# writes the run's HTML report (deepshard report) and prints its path.
# Usage: scripts/demo.sh [-n RANKS] [extra `deepshard train` args, e.g. --set train.steps=50]
set -euo pipefail
cd "$(dirname "$0")/.."
ranks=2
if [ "${1:-}" = "-n" ]; then ranks="$2"; shift 2; fi
scripts/setup.sh --target deepshard
build_dir="${BUILD_DIR:-build}"
DEEPSHARD="$build_dir/deepshard" scripts/fetch_brown.sh data
"$build_dir/deepshard" launch -n "$ranks" -- \
  "$build_dir/deepshard" train --config examples/gpt-brown.json "$@"
run_dir=runs/gpt-brown  # examples/gpt-brown.json's train.run_dir, unless --set overrides it
for a in "$@"; do case "$a" in train.run_dir=*) run_dir="${a#train.run_dir=}" ;; esac; done
echo "report: $("$build_dir/deepshard" report "$run_dir")"
