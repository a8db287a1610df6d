#!/usr/bin/env bash
# scripts/slurm_sweep.sh on a real one-node Slurm (ctest slurm.sweep, label cpu): starts
# slurmctld and slurmd (local_slurm.sh), runs a 4-model CPU sweep as a 2-task job array with its
# merge job, waits for them, and checks that every model trained in its shard and that the merged
# summary is the summary of the same sweep run whole, here. Exit 77 (ctest: skipped) with the
# reason where Slurm cannot run (not root, or slurm-wlm and munge not installed: scripts/setup.sh
# --slurm installs them).
#   slurm_sweep.sh LENET5_BINARY WORK_DIR MNIST_DIR
set -euo pipefail
lenet5=$1 work=$2 mnist=$3
here=$(cd "$(dirname "$0")" && pwd)
[ -f "$mnist/t10k-labels-idx1-ubyte" ] || [ -f "$mnist/t10k-labels-idx1-ubyte.gz" ] ||
  { echo "MNIST is not in $mnist: run scripts/fetch_mnist.sh"; exit 1; }
rm -rf "$work" && mkdir -p "$work"
work=$(cd "$work" && pwd)
. "$here/local_slurm.sh"
trap 'slurm_stop "$work/slurm"' EXIT
why=$(slurm_start "$work/slurm") || { echo "SKIPPED: $why"; exit 77; }
export SLURM_CONF=$work/slurm/slurm.conf

# Four tiny models (two seeds, two learning rates): 256 images, one epoch each.
sweep=(--device cpu --threads 1 --data "$mnist" --train-limit 256 --epochs 1 --augment none
       --seeds 1-2 --set lr=0.05,0.1)
LENET5=$lenet5 "$here/../../scripts/slurm_sweep.sh" 2 "$work/sharded" -- "${sweep[@]}"
for _ in $(seq 600); do  # at most 5 minutes
  [ -z "$(squeue -h 2>/dev/null)" ] && break
  sleep 0.5
done
[ -z "$(squeue -h)" ] || { echo "the jobs did not finish within 5 minutes:"; squeue; exit 1; }
for log in "$work/sharded"/slurm-*.out; do echo "== $log"; cat "$log"; done
[ -f "$work/sharded/summary.csv" ] || { echo "no merged summary"; exit 1; }

"$lenet5" -q sweep "${sweep[@]}" --out "$work/whole" >"$work/whole.log" 2>&1 ||
  { cat "$work/whole.log"; exit 1; }
# Every model trained in one shard or the other, as in the whole sweep.
models() { find "$1" -name last.safetensors -printf '%h\n' | xargs -n1 basename | sort; }
diff <(models "$work/sharded") <(models "$work/whole")
[ "$(models "$work/whole" | wc -l)" -eq 4 ] || { echo "the whole sweep did not train 4 models"; exit 1; }
# The same summary, but for the seconds to 99 % (the last column), which are wall times.
strip_seconds() { sed 's/,[^,]*$//' "$1"; }
diff <(strip_seconds "$work/sharded/summary.csv") <(strip_seconds "$work/whole/summary.csv")
echo "merged summary of the 2 shards equals the whole sweep's:"
cat "$work/sharded/summary.csv"
