#!/usr/bin/env bash
# One training epoch on the CPU, side by side: lenet5 --device cpu and the same LeNet-5 in PyTorch's
# eager mode on the CPU (scripts/pytorch_peer.py --device cpu), both from one config file's [train]
# section (default configs/lenet5.toml: batch 64, elastic augmentation), then the same with
# --augment none. Each pair runs twice: pinned to cores 0 and 1 (taskset -c 0,1) with 2 threads,
# then on every core of the machine with one thread per core. Prints one line per run as it goes,
# then a table of epoch times (the training pass only; evaluation is not timed on either side).
#
#   scripts/bench_cpu_vs_pytorch.sh [--config F] [--epochs N] [--lenet5-only]
#
# --epochs N (default 1): each run trains N epochs and the table shows the median epoch.
# --lenet5-only: measure lenet5 alone (no PyTorch needed). Without it, a missing PyTorch is an
# error (exit 1) after lenet5's half has been measured and printed.
# Environment: LENET5 (default build/lenet5), PYTHON (default python3), LENET5_DATA (MNIST folder).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
config=configs/lenet5.toml epochs=1 lenet5_only=0
while [ $# -gt 0 ]; do
  case "$1" in
    --config) config=$2; shift 2 ;;
    --epochs) epochs=$2; shift 2 ;;
    --lenet5-only) lenet5_only=1; shift ;;
    -h|--help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench_cpu_vs_pytorch: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
lenet5=${LENET5:-build/lenet5}
python=${PYTHON:-python3}
data=${LENET5_DATA:-data/mnist}
[ -f "$config" ] || { echo "bench_cpu_vs_pytorch: no config file '$config' (see --help)" >&2; exit 2; }
[ -x "$lenet5" ] || { echo "bench_cpu_vs_pytorch: no lenet5 binary at $lenet5 (build it, or set LENET5)" >&2; exit 2; }
command -v taskset >/dev/null || { echo "bench_cpu_vs_pytorch: taskset not found (Debian/Ubuntu: util-linux)" >&2; exit 1; }
all_cores=$(nproc --all)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
results="$out/results.tsv"  # program, augment, placement, threads, median epoch s, test accuracy

# The runs: "pinned" on cores 0-1 with 2 threads, "all" on every core with one thread per core.
placements=("pinned 0,1 2" "all 0-$((all_cores - 1)) $all_cores")

run_lenet5() {  # augment, placement, cpu list, threads
  local dir="$out/lenet5-$1-$2"
  taskset -c "$3" "$lenet5" -q --config "$config" train --device cpu --data "$data" \
    --epochs "$epochs" --augment "$1" --threads "$4" --out "$dir" >/dev/null
  # metrics.csv: epoch,lr,train_loss,train_acc,test_loss,test_acc,seconds,images_per_s
  "$python" - "$dir/metrics.csv" "$@" >>"$results" <<'PY'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
print("lenet5", sys.argv[2], sys.argv[3], sys.argv[5],
      statistics.median(float(r["seconds"]) for r in rows), rows[-1]["test_acc"], sep="\t")
PY
  tail -n 1 "$results"
}

run_pytorch() {  # augment, placement, cpu list, threads
  local file="$out/pytorch-$1-$2.jsonl"
  OMP_NUM_THREADS=$4 taskset -c "$3" "$python" scripts/pytorch_peer.py --config "$config" \
    --device cpu --threads "$4" --epochs "$epochs" --augment "$1" --data "$data" >"$file"
  "$python" - "$file" "$@" >>"$results" <<'PY'
import json, sys
summary = [json.loads(l) for l in open(sys.argv[1]) if '"summary"' in l][-1]
print("pytorch " + summary["torch"], sys.argv[2], sys.argv[3], sys.argv[5],
      summary["median_epoch_s"], f"{100 * summary['final_test_accuracy']:.2f}", sep="\t")
PY
  tail -n 1 "$results"
}

have_torch=0
if [ "$lenet5_only" -eq 0 ] && "$python" -c 'import torch' 2>/dev/null; then have_torch=1; fi
for placement in "${placements[@]}"; do
  read -r name cpus threads <<<"$placement"
  for augment in elastic none; do
    run_lenet5 "$augment" "$name" "$cpus" "$threads"
    if [ "$have_torch" -eq 1 ]; then run_pytorch "$augment" "$name" "$cpus" "$threads"; fi
  done
done

"$python" - "$results" "$config" "$epochs" "$all_cores" <<'PY'
import sys
rows = [line.rstrip("\n").split("\t") for line in open(sys.argv[1])]
print(f"\n{sys.argv[2]}: {sys.argv[3]} epoch(s) per run, the median epoch's training time; "
      f"the machine has {sys.argv[4]} cores")
print("| augment | cores, threads | lenet5 epoch | PyTorch epoch | lenet5 test acc | "
      "PyTorch test acc | PyTorch / lenet5 |")
print("|---|---|---|---|---|---|---|")
for placement in ("pinned", "all"):
    for augment in ("elastic", "none"):
        def row(program):
            return next((r for r in rows if r[0].startswith(program) and r[1] == augment
                         and r[2] == placement), None)
        mine, peer = row("lenet5"), row("pytorch")
        if not mine:
            continue
        cores = ("0-1" if placement == "pinned" else "all") + f", {mine[3]}"
        peer_epoch = f"{float(peer[4]):.2f} s" if peer else "-"
        peer_accuracy = f"{peer[5]} %" if peer else "-"
        ratio = f"{float(peer[4]) / float(mine[4]):.2f}x" if peer else "-"
        print(f"| {augment} | {cores} | {float(mine[4]):.2f} s | {peer_epoch} | {mine[5]} % | "
              f"{peer_accuracy} | {ratio} |")
peers = [r[0] for r in rows if r[0].startswith("pytorch")]
if peers:
    print(f"{peers[0]}, eager on the CPU, torch.set_num_threads as the threads say")
PY

if [ "$lenet5_only" -eq 0 ] && [ "$have_torch" -eq 0 ]; then
  echo "bench_cpu_vs_pytorch: PyTorch is not installed for $python: only lenet5 was measured." >&2
  echo "  Install it (pip install torch) and run again, or pass --lenet5-only." >&2
  exit 1
fi
