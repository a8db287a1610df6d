#!/usr/bin/env bash
# The book's network against LeCun et al. 1998's, one difference at a time (README, "LeCun 1998":
# the ablation). Each row trains every seed with `lenet5 bench` and reports the final test error
# (mean, standard deviation, min and max over the seeds), the trainable parameters and the median
# epoch time (epochs 2 and later, training only).
#
#   scripts/ablation_lecun1998.sh [--seeds 1,2,3,4,5] [--device gpu|cpu] [--out DIR]
#                                 [-- flags for every bench, e.g. --epochs 1 --train-limit 500]
#
# Rows 1-7 use the default training (20 epochs, batch 128, cosine lr 0.05, the data set's
# augmentation) with the fast kernels, on --device (gpu by default), one seed after another: the
# whole-step kernels have none of the paper's parts, and one kernel set keeps the epoch times
# comparable. The last two rows use the paper's training (configs/lecun1998.toml: SDLM, one sample
# per step, 20 passes) on the CPU with one thread each, every seed a `lenet5 train` of its own, all
# at once (started first, as they take minutes); their run folders stay, DIR/8-paper/seed=S and
# DIR/9-book-sdlm/seed=S, so that `lenet5 figures lecun98.fig5 --lecun98-runs DIR/8-paper` draws
# the paper's Figure 5 from them. DIR (default runs/ablation-<time>) also gets the other rows' JSON
# lines, ablation.md and ablation.csv.
# Environment: LENET5 (default build/lenet5), LENET5_DATA (MNIST folder, default data/mnist).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
seeds=1,2,3,4,5 device=gpu out=""
while [ $# -gt 0 ]; do
  case "$1" in
    --seeds) seeds=$2; shift 2 ;;
    --device) device=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --) shift; break ;;
    -h|--help) sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "ablation_lecun1998: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
lenet5=${LENET5:-build/lenet5}
data=${LENET5_DATA:-data/mnist}
out=${out:-runs/ablation-$(date +%Y%m%d-%H%M%S)}
[ -x "$lenet5" ] || { echo "ablation_lecun1998: no program at $lenet5 (build it, or set LENET5)" >&2; exit 2; }
mkdir -p "$out"

# Every row: a file name, its label, then the flags after the bench's own.
paper_network=(--c3-table lecun --activation scaled-tanh --subsampling trainable --output rbf
               --input-scaling lecun1998)
book_network=(--c3-table full --activation tanh --subsampling average --output softmax
              --input-scaling dataset)
rows=(
  "1-book|book network|"
  "2-c3|+ C3 table of Table I|--c3-table lecun"
  "3-tanh|+ scaled tanh 1.7159 tanh(2a/3)|--activation scaled-tanh"
  "4-subsampling|+ trainable subsampling|--subsampling trainable"
  "5-rbf|+ RBF output and MAP criterion|--output rbf"
  "6-scaling|+ input scaled to -0.1 / 1.175|--input-scaling lecun1998"
  "7-paper-network|1998 network (all five)|${paper_network[*]}"
)

# The paper's training, one process per seed and row, in the background.
paper_rows=("8-paper|1998 network and training (SDLM)|"
            "9-book-sdlm|book network, 1998 training (SDLM)|${book_network[*]}")
pids=()
for row in "${paper_rows[@]}"; do
  IFS='|' read -r name _ flags <<<"$row"
  for seed in ${seeds//,/ }; do
    mkdir -p "$out/$name"
    # shellcheck disable=SC2086  # the row's flags are words
    "$lenet5" -q --config configs/lecun1998.toml train --data "$data" --seed "$seed" $flags "$@" \
      --out "$out/$name/seed=$seed" >"$out/$name/seed=$seed.log" 2>&1 &
    pids+=($!)
  done
done

for row in "${rows[@]}"; do
  IFS='|' read -r name label flags <<<"$row"
  echo "ablation: $label" >&2
  # shellcheck disable=SC2086
  "$lenet5" -q bench --device "$device" --kernels fast --data "$data" --seeds "$seeds" $flags "$@" \
    >"$out/$name.jsonl" 2>"$out/$name.log"
done
echo "ablation: waiting for the SDLM rows (${#pids[@]} processes)" >&2
status=0
for pid in "${pids[@]}"; do wait "$pid" || status=1; done
[ "$status" -eq 0 ] || { echo "ablation_lecun1998: an SDLM run failed (its log in $out)" >&2; exit 1; }

labels=()
for row in "${rows[@]}" "${paper_rows[@]}"; do labels+=("$row"); done
python3 - "$out" "${labels[@]}" <<'EOF'
import csv, glob, json, statistics, sys
out, rows = sys.argv[1], sys.argv[2:]
parameters = {}  # the networks', from the bench rows: the train rows have the same networks


def bench_row(name):
    events = [json.loads(l) for l in open(f"{out}/{name}.jsonl") if l.startswith("{")]
    setup = next(e for e in events if e.get("event") == "setup")
    seeds = [e for e in events if e.get("event") == "seed"]
    device = setup["device"] + (f" ({setup['gpu']})" if "gpu" in setup else "")
    return ([100 * (1 - s["final_test_accuracy"]) for s in seeds],
            statistics.median(s["median_epoch_s"] for s in seeds), device, setup["parameters"])


def train_row(name, same_network_as):
    errors, epochs = [], []
    for metrics in sorted(glob.glob(f"{out}/{name}/seed=*/metrics.csv")):
        rows = list(csv.DictReader(open(metrics)))
        errors.append(100 - float(rows[-1]["test_acc"]))
        epochs.append(statistics.median(float(r["seconds"]) for r in rows[1:]))
    return errors, statistics.median(epochs), "cpu, 1 thread", parameters[same_network_as]


table = []
for row in rows:
    name, label, _ = row.split("|", 2)
    if name.startswith("8-"):
        errors, epoch, device, params = train_row(name, "7-paper-network")
    elif name.startswith("9-"):
        errors, epoch, device, params = train_row(name, "1-book")
    else:
        errors, epoch, device, params = bench_row(name)
        parameters[name] = params
    training = "1998 (SDLM, batch 1, 20 passes)" if name[0] in "89" else "default"
    table.append((name, label, training, device, errors, epoch, params))

md = ["| network | training | device | test error, mean ± sd | min | max | seeds | parameters | epoch (median) |",
      "|---|---|---|---|---|---|---|---|---|"]
lines_csv = ["row,label,training,device,mean_error_pct,sd_error_pct,min_error_pct,max_error_pct,seeds,parameters,median_epoch_s"]
for name, label, training, device, errors, epoch, params in table:
    mean, sd = statistics.mean(errors), statistics.stdev(errors) if len(errors) > 1 else 0.0
    md.append(f"| {label} | {training} | {device} | {mean:.2f} ± {sd:.2f} % | {min(errors):.2f} % | "
              f"{max(errors):.2f} % | {len(errors)} | {params:,} | {1000 * epoch:.1f} ms |")
    lines_csv.append(f"{name},\"{label}\",\"{training}\",\"{device}\",{mean:.4f},{sd:.4f},"
                     f"{min(errors):.4f},{max(errors):.4f},{len(errors)},{params},{epoch:.6f}")
open(f"{out}/ablation.md", "w").write("\n".join(md) + "\n")
open(f"{out}/ablation.csv", "w").write("\n".join(lines_csv) + "\n")
print("\n".join(md))
EOF
