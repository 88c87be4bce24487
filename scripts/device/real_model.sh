#!/usr/bin/env bash
# A real GGUF onto the GPU machine, which has no network and takes 64 MiB a call (the tracked tree,
# ~19 MB, included): the file goes in PIECES pieces (default 3 equal ones; PIECE_MB="30 35" gives
# pieces of those sizes and the rest; SmolLM2-135M-Instruct Q4_1 is 98 MB), one a call, each
# carried next to .devcarry, and is put back together on the machine (kept in /tmp/real while it
# is held).
#
#   PHASE=pack (dev machine, repo root) splits MODEL (default the SmolLM2 file of
#              scripts/models.sha256, from FISH_CACHE/models: scripts/fetch_models.sh) into
#              .devreal/part-N and writes .devreal/manifest (name, sha256, pieces); prints the
#              carry list of each call.
#   PHASE=stash (GPU machine, any call; mixed_call.sh runs it first) copies the carried piece(s)
#              and the manifest to /tmp/real; once every piece is there it joins them, checks the
#              sha256 against the manifest and prints "real model: NAME ready" (FISH_MODELS_DIR=
#              /tmp/real then finds it by name), else which pieces are still missing.
# Carry, call i of PIECES: [".devcarry", ".gl", ".devreal/manifest", ".devreal/part-i"] (the last
# call's pieces may also go together where they fit the 64 MiB).
set -uo pipefail
PHASE=${PHASE:-stash}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
R=$root/.devreal
T=/tmp/real
say() { echo "real_model: $*"; }

if [ "$PHASE" = pack ]; then
  set -e
  cache=${FISH_CACHE:-$HOME/.cache/fish}
  name=${MODEL_NAME:-SmolLM2-135M-Instruct.Q4_1.gguf}
  model=${MODEL:-$cache/models/$name}
  name=$(basename "$model")
  [ -f "$model" ] || { say "no $model: run scripts/fetch_models.sh (or set MODEL)"; exit 1; }
  want=$(awk -v n="$name" '$2 == n {print $1}' "$root/scripts/models.sha256")
  sha=$(sha256sum "$model" | cut -d' ' -f1)
  if [ -n "$want" ] && [ "$want" != "$sha" ]; then
    say "$model: sha256 $sha, scripts/models.sha256 says $want"
    exit 1
  fi
  pieces=${PIECES:-3}
  grep -qx '/.devreal/' "$root/.git/info/exclude" 2>/dev/null ||
    { [ -d "$root/.git" ] && echo '/.devreal/' >> "$root/.git/info/exclude"; } || true
  rm -rf "$R" && mkdir -p "$R"
  if [ -n "${PIECE_MB:-}" ]; then  # PIECE_MB="30 35": those sizes (MB), the rest in the last piece
    pieces=$(( $(echo $PIECE_MB | wc -w) + 1 ))
    off=0 i=0
    for mb in $PIECE_MB; do
      dd if="$model" of="$R/part-$i" bs=1000000 skip=$off count=$mb status=none
      off=$((off + mb)) i=$((i + 1))
    done
    dd if="$model" of="$R/part-$i" bs=1000000 skip=$off status=none
  else
    split -n "$pieces" -d -a 1 "$model" "$R/part-"
  fi
  printf 'name=%s\nsha256=%s\npieces=%s\n' "$name" "$sha" "$pieces" > "$R/manifest"
  du -h "$R"/part-* | sed 's/^/real_model: /'
  for ((i = 0; i < pieces; i++)); do
    say "call $((i + 1)): carry [\".devcarry\", \".gl\", \".devreal/manifest\", \".devreal/part-$i\"]"
  done
  exit 0
fi

if [ "$PHASE" = stash ]; then
  [ -f "$R/manifest" ] || [ -f "$T/manifest" ] || exit 0  # nothing carried, nothing stashed
  mkdir -p $T
  [ -f "$R/manifest" ] && cp "$R/manifest" $T/
  for p in "$R"/part-*; do [ -f "$p" ] && cp "$p" $T/; done
  name=$(sed -n 's/^name=//p' $T/manifest)
  sha=$(sed -n 's/^sha256=//p' $T/manifest)
  pieces=$(sed -n 's/^pieces=//p' $T/manifest)
  if [ -f "$T/$name" ] && [ "$(sha256sum "$T/$name" | cut -d' ' -f1)" = "$sha" ]; then
    say "$name ready in $T"
    exit 0
  fi
  missing=()
  for ((i = 0; i < pieces; i++)); do [ -f $T/part-$i ] || missing+=(part-$i); done
  if [ ${#missing[@]} -gt 0 ]; then
    say "$name: still missing ${missing[*]} (carry them in the next calls)"
    exit 0
  fi
  cat $(for ((i = 0; i < pieces; i++)); do echo $T/part-$i; done) > "$T/$name.tmp"
  got=$(sha256sum "$T/$name.tmp" | cut -d' ' -f1)
  if [ "$got" != "$sha" ]; then
    say "$name: joined sha256 $got, the manifest says $sha: not used"
    rm -f "$T/$name.tmp"
    exit 1
  fi
  mv "$T/$name.tmp" "$T/$name"
  say "$name ready in $T"
  exit 0
fi
say "unknown PHASE=$PHASE (pack, stash)"
exit 1
