#!/usr/bin/env bash
# Runs a `lenet5 sweep` on a Slurm cluster as a job array: array task K of N trains the K-th shard
# (`--shard K/N`) into OUT/shard-K, and a merge job, which starts once every task has succeeded,
# joins their summaries into OUT/summary.csv and OUT/summary.json (`lenet5 sweep --merge`).
#
#   scripts/slurm_sweep.sh SHARDS OUT [SBATCH_OPTION...] -- SWEEP_ARGUMENT...
#
# For example, 16 seeds of two learning rates in 4 tasks of one GPU each:
#   scripts/slurm_sweep.sh 4 runs/lr-sweep --partition=gpu --gres=gpu:1 --time=30 -- \
#     --config configs/fast.toml --seeds 1-16 --set lr=0.05,0.1
# The sbatch options are given to every task and to the merge job. Each task's output is
# OUT/slurm-JOB_K.out, the merge job's OUT/slurm-merge.out. Prints the array's and the merge
# job's ids (follow them with `squeue`). A failed task holds the merge back (afterok); run that
# shard again with `lenet5 sweep --resume OUT/shard-K`, then the merge by hand.
#
# Environment: LENET5 (the program; default build/lenet5 of this checkout), SBATCH (default
# sbatch).
set -euo pipefail
usage() { sed -n '6,6p;8,10p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
[ $# -ge 3 ] || usage
shards=$1 out=$2
shift 2
[[ "$shards" =~ ^[1-9][0-9]*$ ]] || { echo "slurm_sweep.sh: SHARDS must be a positive number, not '$shards'" >&2; exit 2; }
sbatch_options=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do sbatch_options+=("$1"); shift; done
[ "${1:-}" = "--" ] || { echo "slurm_sweep.sh: put -- before the sweep's arguments" >&2; usage; }
shift
[ $# -gt 0 ] || { echo "slurm_sweep.sh: no sweep arguments after --" >&2; usage; }
root=$(cd "$(dirname "$0")/.." && pwd)
lenet5=$(realpath "${LENET5:-$root/build/lenet5}")
[ -x "$lenet5" ] || { echo "slurm_sweep.sh: $lenet5 is not built (scripts/setup.sh builds it)" >&2; exit 1; }
sbatch=${SBATCH:-sbatch}
mkdir -p "$out"
out=$(realpath "$out")

# The task's command line, quoted for the shell that sbatch --wrap starts.
task="$(printf '%q ' "$lenet5" sweep "$@") --shard \$SLURM_ARRAY_TASK_ID/$shards"
task+=" --out $(printf '%q' "$out")/shard-\$SLURM_ARRAY_TASK_ID"
array=$("$sbatch" --parsable --job-name=lenet5-sweep --array="1-$shards" \
  --output="$out/slurm-%A_%a.out" "${sbatch_options[@]}" --wrap "$task")
array=${array%%;*}  # "id;cluster" on a federation
shard_dirs=()
for k in $(seq 1 "$shards"); do shard_dirs+=("$out/shard-$k"); done
merge=$("$sbatch" --parsable --job-name=lenet5-sweep-merge --dependency="afterok:$array" \
  --output="$out/slurm-merge.out" "${sbatch_options[@]}" \
  --wrap "$(printf '%q ' "$lenet5" sweep --merge "${shard_dirs[@]}" --out "$out")")
echo "submitted: array job $array ($shards tasks), merge job ${merge%%;*}; summary in $out"
