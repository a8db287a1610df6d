#!/usr/bin/env bash
# Side-by-side training benchmark on one GPU, in one run: lenet5 (its kernel sets: "whole-step",
# the default "fast", and the chapter's "book") and the same LeNet-5 in PyTorch (eager, and the
# whole step in a CUDA graph; scripts/pytorch_peer.py), with the same hyper-parameters and data.
# Prints JSON lines, then a table with each one's epoch time, images/s, accuracy and how much
# slower it is than lenet5's first kernel set in --modes.
# Without PyTorch it benchmarks lenet5 alone.
#
#   scripts/bench_vs_pytorch.sh [--epochs N] [--seeds 1,2,3] [--batch-size B] [--modes LIST]
#
# --modes picks what runs (default whole-step,fast,book,eager,graph): whole-step, fast and book
# are lenet5's kernel sets, eager and graph PyTorch's. With several seeds every program trains once per seed (the same
# seeds on both sides) and the table shows mean and minimum accuracy over them.
# Environment: LENET5 (default build/lenet5), PYTHON (default python3), LENET5_DATA (MNIST folder).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
epochs=10 seeds=1 batch=64 modes=whole-step,fast,book,eager,graph
while [ $# -gt 0 ]; do
  case "$1" in
    --epochs) epochs=$2; shift 2 ;;
    --seed|--seeds) seeds=$2; shift 2 ;;
    --batch-size) batch=$2; shift 2 ;;
    --modes) modes=$2; shift 2 ;;
    -h|--help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench_vs_pytorch: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
reference=""  # the first lenet5 kernel set in --modes: the row the others are compared with
for mode in ${modes//,/ }; do
  case "$mode" in
    whole-step|fast|book) [ -n "$reference" ] || reference=$mode ;;
    eager|graph) ;;
    *) echo "bench_vs_pytorch: unknown mode '$mode' (whole-step, fast, book, eager, graph)" >&2; exit 2 ;;
  esac
done
[ -n "$reference" ] || { echo "bench_vs_pytorch: --modes needs a lenet5 kernel set (whole-step, fast or book)" >&2; exit 2; }
lenet5=${LENET5:-build/lenet5}
python=${PYTHON:-python3}
data=${LENET5_DATA:-data/mnist}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
wants() { case ",$modes," in *",$1,"*) return 0 ;; *) return 1 ;; esac; }

common=(--config configs/lenet5.toml --device gpu --epochs "$epochs" --batch-size "$batch" --data "$data")
for kernels in whole-step fast book; do
  wants "$kernels" || continue
  "$lenet5" -q bench "${common[@]}" --seeds "$seeds" --kernels "$kernels" |
    sed "s/^{/{\"framework\":\"lenet5\",\"mode\":\"$kernels\",/" | tee "$out/lenet5-$kernels.jsonl"
done
if "$python" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
  for mode in eager graph; do
    wants "$mode" || continue
    for seed in ${seeds//,/ }; do
      "$python" scripts/pytorch_peer.py --mode "$mode" --epochs "$epochs" --seed "$seed" \
        --batch-size "$batch" --data "$data" | tee -a "$out/pytorch-$mode.jsonl"
    done
  done
else
  echo "bench_vs_pytorch: PyTorch with CUDA not found: lenet5 only" >&2
fi

"$python" - "$out" "$batch" "$reference" <<'PY'
import glob, json, os, statistics, sys
rows = []
for path in sorted(glob.glob(os.path.join(sys.argv[1], "*.jsonl"))):
    lines = [json.loads(l) for l in open(path) if l.startswith("{")]
    epochs = [l for l in lines if l.get("event") == "epoch"]
    first = lines[0]
    # lenet5 writes one "seed" line per seed; the PyTorch script one "summary" line per run.
    per_seed_event = "seed" if first["framework"] == "lenet5" else "summary"
    per_seed = [l for l in lines if l.get("event") == per_seed_event]
    medians = [l["median_epoch_s"] for l in per_seed]
    accs = [l["final_test_accuracy"] for l in per_seed]
    t99s = [l.get("time_to_99_s") for l in per_seed]
    median_epoch = statistics.median(medians)
    reached = [t for t in t99s if t is not None]
    rows.append(dict(framework=first["framework"], mode=first["mode"], epoch=median_epoch,
                     ips=None, accs=accs, t99=(statistics.mean(reached) if len(reached) == len(t99s) else None),
                     reached=len(reached), seeds=len(t99s)))
    steady = [e for e in epochs if e.get("epoch", 1) > 1] or epochs
    rows[-1]["ips"] = statistics.median(e["images_per_s"] for e in steady)
ref = next(r for r in rows if (r["framework"], r["mode"]) == ("lenet5", sys.argv[3]))
print(f"\nbatch {sys.argv[2]}, {ref['seeds']} seed(s) per program")
print(f"| program | kernels / mode | epoch (median, epochs 2+) | images/s | test accuracy (mean, min) | time to 99 % (mean) | lenet5 {sys.argv[3]} is faster by |")
print("|---|---|---|---|---|---|---|")
for r in rows:
    t99 = f"{r['t99']:.3f} s" if r["t99"] is not None else f"reached by {r['reached']} of {r['seeds']} seeds"
    acc = f"{100*statistics.mean(r['accs']):.2f} %, {100*min(r['accs']):.2f} %"
    print(f"| {r['framework']} | {r['mode']} | {r['epoch']*1000:.1f} ms | {r['ips']/1000:.0f}k | {acc} | {t99} | {r['epoch']/ref['epoch']:.1f}x |")
PY
