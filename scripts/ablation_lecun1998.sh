#!/usr/bin/env bash
# The book's network against LeCun et al. 1998's, one difference at a time, in both directions
# (docs/lecun1998.md: the ablation). Each row trains every seed and reports the final test
# error (mean, standard deviation, min and max over the seeds), the trainable parameters and the
# median epoch time (epochs 2 and later, training only).
#
#   scripts/ablation_lecun1998.sh [--seeds 1,2,3,4,5] [--device gpu|cpu] [--out DIR]
#                                 [--rows 1,2,...] [--table-only]
#                                 [-- flags for every run, e.g. --epochs 1 --train-limit 500]
#
# Rows 1-7 and 15 start from the book's network with the default training (20 epochs, batch 128,
# cosine lr 0.05, the data set's augmentation) and add one part of the paper's at a time, then all
# six;
# `lenet5 bench` on the fast kernels, on --device (gpu by default), one seed after another (the
# whole-step kernels have none of the paper's parts, and one kernel set keeps the epoch times
# comparable). Rows 8-14 and 16 use the paper's training (configs/lecun1998.toml: SDLM, one sample
# per step, 20 passes): the 1998 network, the book's, then the 1998 network with one of its parts
# put back to the book's at a time. Each seed is a `lenet5 train` on one CPU thread, all at once
# (started first, as they take minutes); their run folders stay in DIR/<row>/seed=S, so that
# `lenet5 figures lecun98.fig5 --lecun98-runs DIR/8-paper` draws the paper's Figure 5 from them.
# --rows runs only those rows; --table-only trains nothing. Either way the table is made from
# every row DIR holds, as ablation.md and ablation.csv (default DIR: runs/ablation-<time>).
# Environment: LENET5 (default build/lenet5), LENET5_DATA (MNIST folder, default data/mnist).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
seeds=1,2,3,4,5 device=gpu out="" only="" table_only=0
while [ $# -gt 0 ]; do
  case "$1" in
    --seeds) seeds=$2; shift 2 ;;
    --device) device=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --rows) only=",$2,"; shift 2 ;;
    --table-only) table_only=1; shift ;;
    --) shift; break ;;
    -h|--help) sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "ablation_lecun1998: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
lenet5=${LENET5:-build/lenet5}
data=${LENET5_DATA:-data/mnist}
out=${out:-runs/ablation-$(date +%Y%m%d-%H%M%S)}
[ "$table_only" -eq 1 ] || [ -x "$lenet5" ] ||
  { echo "ablation_lecun1998: no program at $lenet5 (build it, or set LENET5)" >&2; exit 2; }
mkdir -p "$out"

# Every row: its number and name (the files' name), its label, then its flags.
paper_network="--c3-table lecun --activation scaled-tanh --subsampling trainable --output rbf"
paper_network+=" --input-scaling lecun1998 --conv-units squashed"
book_network="--c3-table full --activation tanh --subsampling average --output softmax"
book_network+=" --input-scaling dataset --conv-units linear"
default_training_rows=(
  "1-book|book network|"
  "2-c3|+ C3 table of Table I|--c3-table lecun"
  "3-tanh|+ scaled tanh 1.7159 tanh(2a/3)|--activation scaled-tanh"
  "4-subsampling|+ trainable subsampling|--subsampling trainable"
  "5-rbf|+ RBF output and MAP criterion|--output rbf"
  "6-scaling|+ input scaled to -0.1 / 1.175|--input-scaling lecun1998"
  "15-conv-units|+ C1 and C3 units with their own bias and squashing|--conv-units squashed"
  "7-paper-network|1998 network (all six)|$paper_network"
)
paper_training_rows=(
  "8-paper|1998 network|"
  "9-book-sdlm|book network|$book_network"
  "10-full-c3|1998 network, C3 fully connected|--c3-table full"
  "11-tanh|1998 network, tanh|--activation tanh"
  "12-average|1998 network, average subsampling|--subsampling average"
  "13-softmax|1998 network, softmax output|--output softmax"
  "14-mnist-scaling|1998 network, MNIST's input scaling|--input-scaling dataset"
  "16-linear-conv|1998 network, linear C1 and C3 units|--conv-units linear"
)
chosen() { [ -z "$only" ] || [[ "$only" == *",${1%%-*},"* ]]; }

if [ "$table_only" -eq 0 ]; then
  pids=()
  for row in "${paper_training_rows[@]}"; do
    IFS='|' read -r name _ flags <<<"$row"
    chosen "$name" || continue
    for seed in ${seeds//,/ }; do
      mkdir -p "$out/$name"
      # shellcheck disable=SC2086  # the row's flags are words
      "$lenet5" -q --config configs/lecun1998.toml train --data "$data" --seed "$seed" $flags "$@" \
        --out "$out/$name/seed=$seed" >"$out/$name/seed=$seed.log" 2>&1 &
      pids+=($!)
    done
  done
  for row in "${default_training_rows[@]}"; do
    IFS='|' read -r name label flags <<<"$row"
    chosen "$name" || continue
    echo "ablation: $label" >&2
    # shellcheck disable=SC2086
    "$lenet5" -q bench --device "$device" --kernels fast --data "$data" --seeds "$seeds" $flags "$@" \
      >"$out/$name.jsonl" 2>"$out/$name.log"
  done
  echo "ablation: waiting for the SDLM runs (${#pids[@]} processes)" >&2
  status=0
  for pid in "${pids[@]}"; do wait "$pid" || status=1; done
  [ "$status" -eq 0 ] || { echo "ablation_lecun1998: an SDLM run failed (its log in $out)" >&2; exit 1; }
fi

python3 - "$out" "${#default_training_rows[@]}" "${default_training_rows[@]}" \
  "${paper_training_rows[@]}" <<'EOF'
import csv, glob, json, os, re, statistics, sys
out, default_rows, rows = sys.argv[1], int(sys.argv[2]), sys.argv[3:]


def bench_row(name):
    events = [json.loads(l) for l in open(f"{out}/{name}.jsonl") if l.startswith("{")]
    setup = next(e for e in events if e.get("event") == "setup")
    seeds = [e for e in events if e.get("event") == "seed"]
    device = setup["device"] + (f" ({setup['gpu'].split(' (')[0]})" if "gpu" in setup else "")
    return ([100 * (1 - s["final_test_accuracy"]) for s in seeds],
            statistics.median(s["median_epoch_s"] for s in seeds), device, setup["parameters"])


def train_row(name):
    errors, epochs, params = [], [], None
    for metrics in sorted(glob.glob(f"{out}/{name}/seed=*/metrics.csv")):
        rows = list(csv.DictReader(open(metrics)))
        errors.append(100 - float(rows[-1]["test_acc"]))
        epochs.append(statistics.median(float(r["seconds"]) for r in rows[1:]))
        log = os.path.join(os.path.dirname(metrics), "train.log")
        found = re.search(r": (\d+) trainable parameters", open(log).read()) if os.path.exists(log) else None
        params = int(found.group(1)) if found else params
    return errors, statistics.median(epochs), "cpu, 1 thread", params


md = ["| network | training | device | test error, mean ± sd | min | max | seeds | parameters | epoch (median) |",
      "|---|---|---|---|---|---|---|---|---|"]
lines_csv = ["row,label,training,device,mean_error_pct,sd_error_pct,min_error_pct,max_error_pct,seeds,parameters,median_epoch_s"]
for index, row in enumerate(rows):
    name, label, _ = row.split("|", 2)
    default_training = index < default_rows
    if default_training and os.path.exists(f"{out}/{name}.jsonl"):
        errors, epoch, device, params = bench_row(name)
    elif not default_training and glob.glob(f"{out}/{name}/seed=*/metrics.csv"):
        errors, epoch, device, params = train_row(name)
    else:
        continue  # not run into this folder
    training = "default" if default_training else "1998 (SDLM, batch 1, 20 passes)"
    mean, sd = statistics.mean(errors), statistics.stdev(errors) if len(errors) > 1 else 0.0
    shown = f"{params:,}" if params else "-"
    md.append(f"| {label} | {training} | {device} | {mean:.2f} ± {sd:.2f} % | {min(errors):.2f} % | "
              f"{max(errors):.2f} % | {len(errors)} | {shown} | {1000 * epoch:.1f} ms |")
    lines_csv.append(f"{name},\"{label}\",\"{training}\",\"{device}\",{mean:.4f},{sd:.4f},"
                     f"{min(errors):.4f},{max(errors):.4f},{len(errors)},{params or ''},{epoch:.6f}")
open(f"{out}/ablation.md", "w").write("\n".join(md) + "\n")
open(f"{out}/ablation.csv", "w").write("\n".join(lines_csv) + "\n")
print("\n".join(md))
EOF
