#!/usr/bin/env bash
# Trains the same network with every convolution version of the registry (`--conv-algo`, see
# `lenet5 train --help`) and the same seeds, and prints one row per version: epoch time and final
# test accuracy. The versions compute the same function, so the accuracies must agree within
# TOLERANCE percentage points (default 0.1) of the mean over all versions; the script exits 1
# when one does not.
#
#   scripts/compare_conv_algos.sh [--epochs N] [--seeds 1,2] [--kernels fast|book]
#
# Environment: LENET5 (default build/lenet5), LENET5_DATA (MNIST folder), TOLERANCE.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
epochs=10 seeds=1 kernels=fast
while [ $# -gt 0 ]; do
  case "$1" in
    --epochs) epochs=$2; shift 2 ;;
    --seeds) seeds=$2; shift 2 ;;
    --kernels) kernels=$2; shift 2 ;;
    -h|--help) sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "compare_conv_algos: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
lenet5=${LENET5:-build/lenet5}
data=${LENET5_DATA:-data/mnist}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
algos=$("$lenet5" train --help | grep -o '[0-9] [a-z-]* (' | awk '{print $2}')
[ -n "$algos" ] || { echo "compare_conv_algos: no versions found in 'lenet5 train --help'" >&2; exit 1; }
for algo in $algos; do
  "$lenet5" -q bench --config configs/lenet5.toml --device gpu --data "$data" --epochs "$epochs" \
    --seeds "$seeds" --kernels "$kernels" --conv-algo "$algo" >"$out/$algo.jsonl"
done
python3 - "$out" "${TOLERANCE:-0.1}" $algos <<'PY'
import json, os, statistics, sys
folder, tolerance, algos = sys.argv[1], float(sys.argv[2]), sys.argv[3:]
rows = []
for algo in algos:
    lines = [json.loads(l) for l in open(os.path.join(folder, algo + ".jsonl")) if l.startswith("{")]
    summary = [l for l in lines if l.get("event") == "summary"][-1]
    rows.append((algo, summary["median_epoch_s"], 100 * summary["mean_final_test_accuracy"]))
mean = statistics.mean(r[2] for r in rows)
print("| --conv-algo | epoch (median) | final test accuracy (mean over seeds) | difference from the mean of all |")
print("|---|---|---|---|")
bad = 0
for algo, epoch, acc in rows:
    ok = abs(acc - mean) <= tolerance
    bad += not ok
    print(f"| {algo} | {1000*epoch:.1f} ms | {acc:.2f} % | {acc-mean:+.2f} points{'' if ok else ' (outside the tolerance)'} |")
sys.exit(1 if bad else 0)
PY
