#!/usr/bin/env bash
# Greedy-exact count of the CPU weight paths over experiments/prompts/greedy12.txt: for each
# model, path (gguf, w4a8, w4a16) and int4 setting (group size x sym/asym), how many of the 12
# greedy continuations (N tokens) equal the f32 reference's (--weight-path ref) token for token.
# Usage: scripts/w4_greedy12.sh FISH_BIN MODEL.gguf [N=24] [GROUP_SIZES="32 64 128"]
set -euo pipefail
fish=$1 model=$2 n=${3:-24} groups=${4:-"32 64 128"}
prompts="$(dirname "$0")/../experiments/prompts/greedy12.txt"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
run() {  # run NAME ARGS...: one continuation per prompt line into $tmp/NAME
  local name=$1
  shift
  : >"$tmp/$name"
  while IFS= read -r p; do
    "$fish" generate -m "$model" -p "$p" -n "$n" --temp 0 --ignore-eos --threads 1 "$@" \
      2>/dev/null | tr '\n' ' ' >>"$tmp/$name"
    echo >>"$tmp/$name"
  done <"$prompts"
}
exact() { paste -d'\t' "$tmp/ref" "$tmp/$1" | awk -F'\t' '$1 == $2' | wc -l; }
run ref --weight-path ref
run gguf --weight-path gguf
echo "$(basename "$model") gguf: $(exact gguf)/12"
for path in w4a8 w4a16; do
  for g in $groups; do
    for zp in sym asym; do
      if run "$path-$g-$zp" --weight-path "$path" --group-size "$g" --zero-point "$zp"; then
        echo "$(basename "$model") $path g$g $zp: $(exact "$path-$g-$zp")/12"
      fi
    done
  done
done
