#!/usr/bin/env bash
# Memory of the W4A16 prefill settings: for each model and int4 setting, direct_dequant true
# (panels dequantised from the packed layout) vs false (a row-major duplicate kept), the peak RSS
# of a short `fish generate` (a 20-token prompt: prefill takes the dequantise + GEMM path) and the
# packed / duplicate bytes the stats line reports. One Markdown table on stdout.
# Usage: scripts/w4_memory.sh FISH_BIN MODEL.gguf... [SETTINGS="32:fp 64:asym"]
set -euo pipefail
fish=$1
shift
settings=${SETTINGS:-"32:fp 64:asym"}
prompt="The quick brown fox jumps over the lazy dog while the five boxing wizards jump quickly"
echo "| model | setting | direct_dequant | peak RSS MB | packed MB (all copies) | of which duplicates MB |"
echo "|---|---|---|---|---|---|"
for model in "$@"; do
  for s in $settings; do
    g=${s%%:*} zp=${s##*:}
    for direct in true false; do
      err=$(mktemp)
      /usr/bin/time -f 'peak_rss_kB=%M' "$fish" generate -m "$model" -p "$prompt" -n 4 --temp 0 \
        --ignore-eos --threads 1 --weight-path w4a16 --group-size "$g" --zero-point "$zp" \
        --direct-dequant "$direct" >/dev/null 2>"$err"
      rss=$(sed -n 's/^peak_rss_kB=//p' "$err" | awk '{ printf "%.1f", $1 * 1024 / 1e6 }')
      packed=$(sed -n 's/.* \([0-9.]*\) MB packed (\([0-9.]*\) MB row-major duplicates).*/\1 | \2/p' "$err")
      echo "| $(basename "$model") | w4a16 g$g $zp | $direct | $rss | $packed |"
      rm -f "$err"
    done
  done
done
