#!/usr/bin/env bash
# A real single-node Slurm cluster on loopback (slurmctld + slurmd from Debian's slurm-wlm, a
# generated slurm.conf with auth/none in a temp dir, free ports), then scripts/slurm_array.sh runs
# an 8-cell experiment on a tiny synthetic model as a 3-task job array plus the merge job. Checks:
# each task ran its own shard (cells index % 3 == task), and the merged file holds exactly the rows
# of the same experiment run unsharded (same cell ids, paths, statuses, configs, workloads) with
# the three shard contexts kept. ctest runs it (label harness) with FISH_BIN set. Both daemons run
# as the calling user (root or not; checked both ways), who owns every job. It fails, never skips,
# when Slurm is missing: setup.sh installs it.
set -euo pipefail

fail() { echo "slurm_array_test: FAIL: $*" >&2; exit 1; }
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
fish=${FISH_BIN:-$root/build/fish}
[ -x "$fish" ] || fail "no fish binary at $fish (set FISH_BIN)"
for tool in slurmctld slurmd sbatch sinfo squeue scancel python3; do
  command -v "$tool" > /dev/null || fail "$tool not found: install slurm-wlm (scripts/setup.sh)"
done
# Root is not needed: both daemons run as the calling user, who then owns every job.

tmp=$(mktemp -d "${TMPDIR:-/tmp}/fish-slurm.XXXXXX")
pids=()
cleanup() {
  scancel --quiet --full -u "$(id -un)" --name=fish-slurm_tiny 2> /dev/null || true
  scancel --quiet -u "$(id -un)" --name=fish-slurm_tiny-merge 2> /dev/null || true
  for p in "${pids[@]}"; do kill "$p" 2> /dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2> /dev/null || true; done
  if [ "${keep:-0}" = 1 ]; then echo "slurm_array_test: kept $tmp" >&2; else rm -rf "$tmp"; fi
}
trap cleanup EXIT
keep=1  # until the test passes: the logs are the diagnosis

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
host=$(hostname)
user=$(id -un)
mkdir -p "$tmp/state" "$tmp/spool"
cat > "$tmp/slurm.conf" << EOF
ClusterName=fishtest
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$(free_port)
SlurmdPort=$(free_port)
AuthType=auth/none
CredType=cred/none
SlurmUser=$user
SlurmdUser=$user
StateSaveLocation=$tmp/state
SlurmdSpoolDir=$tmp/spool
SlurmctldPidFile=$tmp/slurmctld.pid
SlurmdPidFile=$tmp/slurmd.pid
SlurmctldLogFile=$tmp/slurmctld.log
SlurmdLogFile=$tmp/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
# Schedule right away (the default backfill pass waits up to 30 s before the dependent merge job).
SchedulerType=sched/builtin
ReturnToService=2
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
NodeName=fishnode NodeAddr=127.0.0.1 NodeHostname=$host CPUs=$(nproc) State=UNKNOWN
PartitionName=fishtest Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
export SLURM_CONF=$tmp/slurm.conf
slurmctld -D -c > "$tmp/slurmctld.out" 2>&1 &
pids+=($!)
slurmd -D -N fishnode > "$tmp/slurmd.out" 2>&1 &
pids+=($!)
for _ in $(seq 1 60); do
  [ "$(sinfo -h -o %T 2> /dev/null)" = idle ] && break
  sleep 0.5
done
[ "$(sinfo -h -o %T 2> /dev/null)" = idle ] || { tail -20 "$tmp"/*.log >&2; fail "the node never became idle"; }

# An experiment of 8 cells on a synthetic 2-layer model: seconds to run.
"$fish" make-model --shape tiny --type q4_0 --out "$tmp/tiny.gguf" > /dev/null
cat > "$tmp/exp.json" << EOF
{"schema_version": 1, "name": "slurm_tiny", "model": "$tmp/tiny.gguf",
 "sweep": {"act": ["int8", "f32"], "n_threads": [1, 2], "n_ctx": [64, 128]},
 "workload": {"n_prompt": 8, "n_gen": 4},
 "measure": {"paths": ["cpu"], "warmup": 0, "repetitions": 2, "stream_MiB": 64, "stream_passes": 1},
 "output": {"dir": "$tmp/unused"}}
EOF
"$fish" run "$tmp/exp.json" --out "$tmp/whole" 2> "$tmp/whole.log" || { cat "$tmp/whole.log" >&2; fail "unsharded run failed"; }

FISH_BIN=$fish timeout 240 "$root/scripts/slurm_array.sh" "$tmp/exp.json" "$tmp/array" 3 --wait \
  > "$tmp/submit.log" 2>&1 || { cat "$tmp/submit.log" "$tmp"/array/slurm-*.out >&2; fail "slurm_array.sh failed"; }
cat "$tmp/submit.log"

python3 - "$tmp" << 'EOF' || fail "merged rows differ from the unsharded run (see above)"
import glob, json, sys
tmp = sys.argv[1]
def lines(p):
    with open(p) as f:
        return [json.loads(l) for l in f if l.strip()]
def rows(p):
    return {(r["cell_id"], r["path"]): r for r in lines(p) if r["kind"] == "row"}
key = lambda r: (r["cell_index"], r["status"], r["config"], r["workload"], r["model_sha256"])
whole = rows(f"{tmp}/whole/slurm_tiny.jsonl")
merged_lines = lines(f"{tmp}/array/slurm_tiny.jsonl")
merged = rows(f"{tmp}/array/slurm_tiny.jsonl")
ok = True
if len(whole) != 8: print(f"unsharded run has {len(whole)} rows, expected 8"); ok = False
if sorted(whole) != sorted(merged):
    print(f"row keys differ: only unsharded {sorted(set(whole) - set(merged))}, only merged {sorted(set(merged) - set(whole))}"); ok = False
for k in sorted(set(whole) & set(merged)):
    if key(whole[k]) != key(merged[k]): print(f"row {k} differs: {key(whole[k])} vs {key(merged[k])}"); ok = False
ctx = [l for l in merged_lines if l["kind"] == "context"]
shards = sorted((c["shard"]["index"], c["shard"]["count"]) for c in ctx)
if shards != [(0, 3), (1, 3), (2, 3)]: print(f"contexts of the merged file: shards {shards}, expected 0..2 of 3"); ok = False
for i in range(3):  # each task wrote only its own cells
    shard = rows(f"{tmp}/array/slurm_tiny.shard-{i}-of-3.jsonl")
    idx = sorted(r["cell_index"] for r in shard.values())
    if idx != [c for c in range(8) if c % 3 == i]: print(f"shard {i} ran cells {idx}"); ok = False
logs = sorted(glob.glob(f"{tmp}/array/slurm-*_*.out"))
if len(logs) != 3: print(f"expected 3 array-task logs, found {logs}"); ok = False
print("slurm_array_test: 3 array tasks, merged", len(merged), "rows = unsharded rows" if ok else "MISMATCH")
sys.exit(0 if ok else 1)
EOF
keep=0
echo "slurm_array_test: PASS"
