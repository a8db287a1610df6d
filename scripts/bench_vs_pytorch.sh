#!/usr/bin/env bash
# Side-by-side training benchmark on one GPU, in one run: lenet5 (its default "fast" kernels and
# the chapter's "book" kernels) and the same LeNet-5 in PyTorch (eager, and the whole step in a
# CUDA graph; scripts/pytorch_peer.py), with the same hyper-parameters and data. Prints JSON
# lines, then a table with each one's epoch time, images/s, accuracy and lenet5's speed-up.
# Without PyTorch it benchmarks lenet5 alone.
#
#   scripts/bench_vs_pytorch.sh [--epochs N] [--seed S] [--batch-size B]
#
# Environment: LENET5 (default build/lenet5), PYTHON (default python3), LENET5_DATA (MNIST folder).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
epochs=10 seed=1 batch=64
while [ $# -gt 0 ]; do
  case "$1" in
    --epochs) epochs=$2; shift 2 ;;
    --seed) seed=$2; shift 2 ;;
    --batch-size) batch=$2; shift 2 ;;
    -h|--help) sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench_vs_pytorch: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
lenet5=${LENET5:-build/lenet5}
python=${PYTHON:-python3}
data=${LENET5_DATA:-data/mnist}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

common=(--config configs/lenet5.toml --device gpu --epochs "$epochs" --batch-size "$batch" --data "$data")
"$lenet5" -q bench "${common[@]}" --seeds "$seed" | sed 's/^{/{"framework":"lenet5","mode":"fast",/' | tee "$out/fast.jsonl"
"$lenet5" -q bench "${common[@]}" --seeds "$seed" --kernels book | sed 's/^{/{"framework":"lenet5","mode":"book",/' | tee "$out/book.jsonl"
if "$python" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
  for mode in eager graph; do
    "$python" scripts/pytorch_peer.py --mode "$mode" --epochs "$epochs" --seed "$seed" \
      --batch-size "$batch" --data "$data" | tee "$out/pytorch-$mode.jsonl"
  done
else
  echo "bench_vs_pytorch: PyTorch with CUDA not found: lenet5 only" >&2
fi

"$python" - "$out" <<'PY'
import glob, json, os, sys
rows = []
for path in sorted(glob.glob(os.path.join(sys.argv[1], "*.jsonl"))):
    lines = [json.loads(l) for l in open(path) if l.startswith("{")]
    summary = [l for l in lines if l.get("event") == "summary"][-1]
    epochs = [l for l in lines if l.get("event") == "epoch"]
    acc = summary.get("final_test_accuracy")
    acc = acc[0] if isinstance(acc, list) else acc
    t99 = next((l for l in lines if l.get("event") == "seed"), {}).get("time_to_99_s", summary.get("time_to_99_s"))
    steady = epochs[1:] if len(epochs) > 1 else epochs
    ips = sorted(e["images_per_s"] for e in steady)[len(steady) // 2]
    rows.append((summary["framework"], summary["mode"], summary["median_epoch_s"], ips, acc, t99))
fast = next(r for r in rows if r[:2] == ("lenet5", "fast"))
print(f"\n| program | kernels / mode | epoch (median, epochs 2+) | images/s | test accuracy | time to 99 % | lenet5 fast is faster by |")
print("|---|---|---|---|---|---|---|")
for r in rows:
    t99 = f"{r[5]:.2f} s" if r[5] else "not reached"
    print(f"| {r[0]} | {r[1]} | {r[2]*1000:.1f} ms | {r[3]/1000:.0f}k | {100*r[4]:.2f} % | {t99} | {r[2]/fast[2]:.1f}x |")
PY
