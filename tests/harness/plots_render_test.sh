#!/usr/bin/env bash
# ctest harness.plots_render: every committed plot (BENCHMARKS_plots/ and the report golden
# plots) renders to a PNG with librsvg's rsvg-convert, an SVG renderer independent of the code
# that wrote them, so a malformed SVG (an unescaped '&', a broken element) fails here instead of
# showing as a blank image. Each PNG must have the SVG's width and height. rsvg-convert comes
# from librsvg2-bin (scripts/setup.sh installs it).
# Environment (ctest): FISH_SOURCE_DIR.
set -uo pipefail
src=${FISH_SOURCE_DIR:?}
command -v rsvg-convert > /dev/null ||
  { echo "plots_render_test: FAIL: no rsvg-convert (apt-get install librsvg2-bin; scripts/setup.sh does)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
n=0 bad=0
for svg in "$src"/BENCHMARKS_plots/*.svg "$src"/tests/data/results/report_golden_plots/*.svg; do
  [ -f "$svg" ] || continue
  n=$((n + 1))
  png=$tmp/$n.png
  if ! rsvg-convert "$svg" -o "$png" 2> "$tmp/err"; then
    echo "plots_render_test: FAIL: $svg: $(head -c 300 "$tmp/err")" >&2
    bad=$((bad + 1))
    continue
  fi
  # The PNG's IHDR width and height (bytes 16..23, big-endian) against the SVG's attributes.
  got=$(od -An -tu1 -j16 -N8 "$png" | awk '{printf "%d %d", $1*16777216+$2*65536+$3*256+$4, $5*16777216+$6*65536+$7*256+$8}')
  want=$(grep -o -m1 '<svg [^>]*' "$svg" | sed -n 's/.*width="\([0-9.]*\)" height="\([0-9.]*\)".*/\1 \2/p' |
         awk '{printf "%d %d", $1 + 0.5, $2 + 0.5}')
  if [ "$got" != "$want" ]; then
    echo "plots_render_test: FAIL: $svg: PNG $got px, the SVG says $want" >&2
    bad=$((bad + 1))
  fi
done
[ "$n" -gt 0 ] || { echo "plots_render_test: FAIL: no plots found under $src" >&2; exit 1; }
echo "plots_render_test: $n plots rendered, $bad failed"
[ "$bad" -eq 0 ]
