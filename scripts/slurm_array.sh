#!/usr/bin/env bash
# Runs an experiment as a Slurm job array: N array tasks each run `fish run EXP --resume` on their
# shard (fish reads SLURM_ARRAY_TASK_ID / SLURM_ARRAY_TASK_COUNT: cells with index % N == task),
# then one job that depends on the whole array runs `fish merge` over the shard files and lists
# missing cells. A task that dies can be resubmitted: --resume keeps its finished rows.
#
#   scripts/slurm_array.sh EXP.json OUT_DIR N_TASKS [--wait] [-- sbatch args...]
#
# Writes OUT_DIR/<name>.shard-<i>-of-<N>.jsonl per task, OUT_DIR/<name>.jsonl merged, and the
# Slurm logs OUT_DIR/slurm-<job>_<task>.out, OUT_DIR/slurm-merge-<job>.out. Prints the two job
# ids. --wait blocks until the merge job ends and exits with its code (0: every cell has a row,
# 2: some missing; see `fish merge`). Extra sbatch arguments (partition, time, cpus) go to every
# job. Environment: FISH_BIN (default: build/fish of this checkout).
set -euo pipefail

usage() { echo "usage: scripts/slurm_array.sh EXP.json OUT_DIR N_TASKS [--wait] [-- sbatch args...]" >&2; exit 1; }
[ $# -ge 3 ] || usage
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
exp=$(realpath "$1")
mkdir -p "$2"
out=$(realpath "$2")
n=$3
shift 3
wait_flag=()
extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --wait) wait_flag=(--wait) ;;
    --) shift; extra=("$@"); break ;;
    *) echo "slurm_array.sh: unknown argument '$1'" >&2; usage ;;
  esac
  shift
done
[[ "$n" =~ ^[1-9][0-9]*$ ]] || { echo "slurm_array.sh: N_TASKS must be a positive integer, got '$n'" >&2; exit 1; }
fish=$(realpath "${FISH_BIN:-$root/build/fish}")
[ -x "$fish" ] || { echo "slurm_array.sh: no fish binary at $fish (build it, or set FISH_BIN)" >&2; exit 1; }
command -v sbatch > /dev/null || { echo "slurm_array.sh: sbatch not found (is Slurm installed? Debian: slurm-wlm)" >&2; exit 1; }
name=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["name"])' "$exp") \
  || { echo "slurm_array.sh: $exp: cannot read the experiment's \"name\"" >&2; exit 1; }

# The tasks run in the submit directory: the checkout, so relative model paths in EXP resolve.
array_id=$(cd "$root" && sbatch --parsable "${extra[@]}" --job-name="fish-$name" --array="0-$((n - 1))" \
  --output="$out/slurm-%A_%a.out" \
  --wrap="exec '$fish' run '$exp' --out '$out' --resume")
array_id=${array_id%%;*}  # --parsable prints "jobid[;cluster]"
shards=()
for ((i = 0; i < n; i++)); do shards+=("'$out/$name.shard-$i-of-$n.jsonl'"); done
# afterany: a task whose cells partly failed exits 2 but its rows count; a shard file that is
# missing altogether makes the merge fail loudly.
merge_id=$(cd "$root" && sbatch --parsable "${extra[@]}" "${wait_flag[@]}" --job-name="fish-$name-merge" \
  --dependency="afterany:$array_id" --output="$out/slurm-merge-%j.out" \
  --wrap="exec '$fish' merge '$out/$name.jsonl' ${shards[*]}") && rc=0 || rc=$?
echo "slurm_array.sh: array job ${array_id} ($n tasks), merge job ${merge_id%%;*} -> $out/$name.jsonl"
exit "$rc"
