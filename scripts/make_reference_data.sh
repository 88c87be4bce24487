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
# Environment: FISH_PYTHON (numpy + gguf), FISH_MODELS_DIR (default <repo>/models),
# REF_TOK_PYTHON: a python with scripts/requirements-reference.txt (transformers,
# torch, ...). When it is unset, steps 1 and 3 reuse the token ids and decoded
# texts already committed (a greedy text is kept only if its ids are unchanged),
# so the logits can be regenerated with numpy + gguf alone.
# Takes several minutes per model on 2 cores (dequantising, loading Gemma's
# 262144-entry vocabulary and the greedy steps dominate).
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
py="${FISH_PYTHON:-/root/.cache/fish/venv/bin/python}"
tok_py="${REF_TOK_PYTHON:-}"
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
  if [[ -n "$tok_py" ]]; then
    "$tok_py" "$repo/scripts/reference_tokenize.py" jobs "$gguf" "$work/prompts_$2.json" "$work/jobs_$2.json"
    "$py" "$repo/scripts/reference_forward.py" "$gguf" --jobs "$work/jobs_$2.json"
    "$tok_py" "$repo/scripts/reference_tokenize.py" annotate "$gguf" "$dir"/prompt_*.json
  else
    echo "make_reference_data: REF_TOK_PYTHON unset, reusing committed token ids in $dir" >&2
    mkdir -p "$work/old_$2"
    cp "$dir"/prompt_*.json "$work/old_$2/"
    reuse_ids "$work/prompts_$2.json" "$work/old_$2" "$work/jobs_$2.json"
    "$py" "$repo/scripts/reference_forward.py" "$gguf" --jobs "$work/jobs_$2.json"
    keep_texts "$work/old_$2" "$dir"
  fi
}

# Jobs from the committed files: same prompt text required, ids taken as stored.
reuse_ids() { # $1: prompts.json, $2: folder of committed files, $3: jobs.json out
  "$py" - "$1" "$2" "$3" <<'EOF'
import json, os, sys
prompts, old, out = sys.argv[1:]
jobs = []
for p in json.load(open(prompts)):
    rec = json.load(open(os.path.join(old, os.path.basename(p["out"]))))
    if rec["prompt"] != p["prompt"]:
        sys.exit(f"{p['out']}: prompt changed; set REF_TOK_PYTHON to re-tokenise")
    jobs.append(dict(p, tokens=rec["tokens"][: rec["n_prompt_tokens"]], tokenizer=rec["tokenizer"]))
json.dump(jobs, open(out, "w"))
EOF
}

# Copy decoded texts from the committed files where the ids did not change.
keep_texts() { # $1: folder of committed files, $2: folder of new files
  "$py" - "$1" "$2" <<'EOF'
import json, os, sys
old_dir, new_dir = sys.argv[1:]
for name in sorted(os.listdir(old_dir)):
    old = json.load(open(os.path.join(old_dir, name)))
    path = os.path.join(new_dir, name)
    new = json.load(open(path))
    if "greedy" in new and old.get("greedy", {}).get("ids") == new["greedy"]["ids"] and "text" in old["greedy"]:
        new["greedy"]["text"] = old["greedy"]["text"]
    elif "greedy" in new:
        print(f"{path}: greedy ids changed, text dropped (set REF_TOK_PYTHON)", file=sys.stderr)
    n = new["n_prompt_tokens"]
    if "continuation_text" in old and old["tokens"][n:] == new["tokens"][n:]:
        new["continuation_text"] = old["continuation_text"]
    with open(path, "w") as f:
        json.dump(new, f, separators=(",", ":"))
        f.write("\n")
EOF
}

# Arguments: which models to regenerate (smollm2, gemma3); default both.
targets=("$@")
[[ ${#targets[@]} -gt 0 ]] || targets=(smollm2 gemma3)
for t in "${targets[@]}"; do
  case "$t" in
    smollm2) run_model SmolLM2-135M-Instruct.Q4_1.gguf smollm2-135m-instruct-q4_1 ;;
    gemma3) run_model gemma-3-270m-q4_k_m.gguf gemma-3-270m-q4_k_m ;;
    *) echo "make_reference_data: unknown model '$t' (smollm2, gemma3)" >&2; exit 2 ;;
  esac
done
du -sh "$out_root"
