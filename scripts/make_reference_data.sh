#!/usr/bin/env bash
# Regenerates the committed reference logits under tests/data/reference/<model>/.
#
# For each real model and each prompt below:
#   1. reference_tokenize.py turns the prompt into ids with the tokenizer that
#      transformers builds from the GGUF (independent of FISH's tokenizer);
#   2. reference_forward.py (numpy + gguf only) greedily extends short prompts
#      to at least 64 positions, runs one teacher-forced pass and writes the
#      per-position top-k log-probs + full-vocab logsumexp (format in its --help);
#      prompt_0 also gets a 16-token greedy continuation;
#   3. reference_tokenize.py annotate adds the decoded continuation text.
#
# Environment: FISH_PYTHON (numpy + gguf), REF_TOK_PYTHON (+ transformers,
# tokenizers, sentencepiece, protobuf: scripts/requirements-reference.txt; defaults
# to FISH_PYTHON), FISH_MODELS_DIR (default <repo>/models).
# Takes several minutes per model on 2 cores (dequantising, loading Gemma's
# 262144-entry vocabulary and the greedy steps dominate).
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
py="${FISH_PYTHON:-/root/.cache/fish/venv/bin/python}"
tok_py="${REF_TOK_PYTHON:-$py}"
models="${FISH_MODELS_DIR:-$repo/models}"
out_root="$repo/tests/data/reference"
export HF_HUB_OFFLINE=1 TRANSFORMERS_VERBOSITY=error

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# The prompts. prompt_3 is longer than Gemma 3's 512-token sliding window
# (from the GPL-3 text every Debian system ships), so the windowed mask of its
# local layers is exercised.
write_prompts() { # $1: output dir
  "$py" - "$1" <<'EOF'
import json, sys, pathlib
out = pathlib.Path(sys.argv[1])
gpl = pathlib.Path("/usr/share/common-licenses/GPL-3").read_text()
start = gpl.index("  The GNU General Public License is a free, copyleft license")
long_text = " ".join(gpl[start:start + 3200].split())
prompts = [
    dict(prompt="The capital of France is", greedy=16, extend_to=64),
    dict(prompt="Lighthouses were once tended by keepers who lived on the rocks for months at a time. "
                "Each evening they trimmed the wicks, polished the great lenses and wound the clockwork "
                "that turned the light, so that ships passing in the dark could fix their position. "
                "Today most of these towers run automatically, and the keepers' cottages have become "
                "museums, holiday homes or ruins slowly reclaimed by the sea.", extend_to=64),
    dict(prompt="def fibonacci(n: int) -> list[int]:\n"
                "    \"\"\"Return the first n Fibonacci numbers.\"\"\"\n"
                "    result = []\n"
                "    a, b = 0, 1\n"
                "    for _ in range(n):\n"
                "        result.append(a)\n"
                "        a, b = b, a + b\n"
                "    return result\n\n\n"
                "if __name__ == \"__main__\":\n"
                "    print(fibonacci(10))\n", extend_to=64),
    dict(prompt=long_text, extend_to=64, top_k=16),
]
for i, p in enumerate(prompts):
    p["out"] = str(out / f"prompt_{i}.json")
(out / "prompts.json").write_text(json.dumps(prompts, indent=1))
EOF
}

run_model() { # $1: GGUF file name, $2: data folder name
  local gguf="$models/$1" dir="$out_root/$2"
  if [[ ! -f "$gguf" ]]; then
    echo "make_reference_data: $gguf not found (run the setup script first)" >&2
    exit 1
  fi
  mkdir -p "$dir"
  write_prompts "$dir"
  mv "$dir/prompts.json" "$work/prompts_$2.json"
  "$tok_py" "$repo/scripts/reference_tokenize.py" jobs "$gguf" "$work/prompts_$2.json" "$work/jobs_$2.json"
  "$py" "$repo/scripts/reference_forward.py" "$gguf" --jobs "$work/jobs_$2.json"
  "$tok_py" "$repo/scripts/reference_tokenize.py" annotate "$gguf" "$dir"/prompt_*.json
}

run_model SmolLM2-135M-Instruct.Q4_1.gguf smollm2-135m-instruct-q4_1
run_model gemma-3-270m-q4_k_m.gguf gemma-3-270m-q4_k_m
du -sh "$out_root"
