#!/usr/bin/env bash
# Greedy-exact count of the CPU weight paths over experiments/prompts/greedy12.txt: for each
# model, path (gguf, w4a8, w4a16) and int4 setting (group size x zero point), how many of the 12
# greedy continuations (N tokens) equal the f32 reference's (--weight-path ref) token for token.
# zero point fp at group 32 also runs with --quantize-head false ("head gguf": the head stays on
# the file's own kernel), since a tied q8_0 head is the one matrix fp cannot repack exactly, and
# once more with --act f32 (that head then multiplies f32 activations, as the reference does).
# Each line: model, setting, greedy-exact, bits per weight of the packed layer matrices.
# Usage: scripts/w4_greedy12.sh FISH_BIN MODEL.gguf [N=24] [GROUP_SIZES="32 64 128"]
#        [ZERO_POINTS="sym asym fp"]
set -euo pipefail
fish=$1 model=$2 n=${3:-24} groups=${4:-"32 64 128"} zps=${5:-"sym asym fp"}
prompts="$(dirname "$0")/../experiments/prompts/greedy12.txt"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
run() {  # run NAME ARGS...: one continuation per prompt line into $tmp/NAME
  local name=$1
  shift
  : >"$tmp/$name"
  while IFS= read -r p; do
    "$fish" generate -m "$model" -p "$p" -n "$n" --temp 0 --ignore-eos --threads 1 "$@" \
      2>"$tmp/$name.err" | tr '\n' ' ' >>"$tmp/$name"
    echo >>"$tmp/$name"
  done <"$prompts"
}
exact() { paste -d'\t' "$tmp/ref" "$tmp/$1" | awk -F'\t' '$1 == $2' | wc -l; }
# Bits per weight: int4 group of G codes + f16 scale + (sym: nothing, asym: u8 zero, fp: f16 m).
bpw() { awk -v g="$1" -v zp="$2" 'BEGIN { e = zp == "sym" ? 0 : zp == "asym" ? 8 : 16;
  printf "%.3f", 4 + (16 + e) / g }'; }
stats() { grep -o 'matrices repacked exactly' "$tmp/$1.err" >/dev/null &&
  sed -n 's/.*, \([0-9]*\/[0-9]*\) matrices repacked exactly.*/\1 exact/p' "$tmp/$1.err" |
  tail -1 || true; }
run ref --weight-path ref
run gguf --weight-path gguf
echo "$(basename "$model") gguf: $(exact gguf)/12"
for path in w4a8 w4a16; do
  for g in $groups; do
    for zp in $zps; do
      if run "$path-$g-$zp" --weight-path "$path" --group-size "$g" --zero-point "$zp"; then
        echo "$(basename "$model") $path g$g $zp: $(exact "$path-$g-$zp")/12," \
          "$(bpw "$g" "$zp") bits/weight, $(stats "$path-$g-$zp")"
      fi
      if [ "$zp" = fp ] && [ "$g" = 32 ] &&
        run "$path-$g-$zp-hg" --weight-path "$path" --group-size "$g" --zero-point "$zp" \
          --quantize-head false; then
        echo "$(basename "$model") $path g$g $zp head gguf: $(exact "$path-$g-$zp-hg")/12," \
          "$(bpw "$g" "$zp") bits/weight (layers), $(stats "$path-$g-$zp-hg")"
      fi
      if [ "$zp" = fp ] && [ "$g" = 32 ] &&
        run "$path-$g-$zp-hf" --weight-path "$path" --group-size "$g" --zero-point "$zp" \
          --quantize-head false --act f32; then
        echo "$(basename "$model") $path g$g $zp head gguf act f32: $(exact "$path-$g-$zp-hf")/12," \
          "$(bpw "$g" "$zp") bits/weight (layers), $(stats "$path-$g-$zp-hf")"
      fi
    done
  done
done
