#!/usr/bin/env bash
# Searches for the fastest settings that reach 99 % test accuracy (how configs/fast.toml was
# chosen): trains every combination of the lists below with `lenet5 bench` on the GPU, and prints
# one row per combination: mean and minimum final accuracy over the seeds, how many seeds reached
# 99.0 %, and the mean training time to get there (time to 99 %, evaluation excluded).
#
#   scripts/sweep_time_to_99.sh [--seeds 1,2] [--batch-sizes 128,256] [--epochs 2,3]
#                               [--lrs 0.05,0.1] [--schedules one-cycle,cosine] [-- extra bench args]
#
# Environment: LENET5 (default build/lenet5), LENET5_DATA (MNIST folder).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
seeds=1,2 batches=128,256 epochs_list=2,3 lrs=0.05,0.1 schedules=one-cycle
while [ $# -gt 0 ]; do
  case "$1" in
    --seeds) seeds=$2; shift 2 ;;
    --batch-sizes) batches=$2; shift 2 ;;
    --epochs) epochs_list=$2; shift 2 ;;
    --lrs) lrs=$2; shift 2 ;;
    --schedules) schedules=$2; shift 2 ;;
    --) shift; break ;;
    -h|--help) sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "sweep_time_to_99: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
lenet5=${LENET5:-build/lenet5}
data=${LENET5_DATA:-data/mnist}
echo "| batch | epochs | lr | schedule | mean accuracy | min accuracy | seeds at 99 % | time to 99 % (mean) | epoch (median) |"
echo "|---|---|---|---|---|---|---|---|---|"
for batch in ${batches//,/ }; do
  for epochs in ${epochs_list//,/ }; do
    for lr in ${lrs//,/ }; do
      for schedule in ${schedules//,/ }; do
        "$lenet5" -q bench --config configs/lenet5.toml --device gpu --data "$data" \
          --batch-size "$batch" --epochs "$epochs" --lr "$lr" --schedule "$schedule" \
          --seeds "$seeds" "$@" |
          python3 -c '
import json, statistics, sys
batch, epochs, lr, schedule = sys.argv[1:5]
lines = [json.loads(l) for l in sys.stdin if l.startswith("{")]
seeds = [l for l in lines if l.get("event") == "seed"]
accs = [l["final_test_accuracy"] for l in seeds]
t99 = [l["time_to_99_s"] for l in seeds if l.get("time_to_99_s") is not None]
t = f"{statistics.mean(t99):.3f} s" if len(t99) == len(seeds) else "-"
med = statistics.median(l["median_epoch_s"] for l in seeds)
print(f"| {batch} | {epochs} | {lr} | {schedule} | {100*statistics.mean(accs):.2f} % | {100*min(accs):.2f} % | {len(t99)} of {len(seeds)} | {t} | {1000*med:.1f} ms |")
' "$batch" "$epochs" "$lr" "$schedule"
      done
    done
  done
done
