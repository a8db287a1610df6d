#!/usr/bin/env bash
# Side-by-side training benchmark on one GPU, in one run: lenet5 (its kernel sets: the default
# "whole-step", "fast", and the chapter's "book") and the same LeNet-5 in PyTorch (eager, and the
# whole step in a CUDA graph; scripts/pytorch_peer.py), both reading one config file's [train]
# section (hyper-parameters, schedule and augmentation), with the same data.
# Prints JSON lines, then a table with each one's epoch time, images/s, accuracy, time to 99 %
# and 99.2 %, peak memory and how much slower it is than lenet5's first kernel set in --modes.
# Without PyTorch it benchmarks lenet5 alone.
#
#   scripts/bench_vs_pytorch.sh [--config F] [--epochs N] [--seeds 1,2,3] [--batch-size B]
#                               [--augment none|affine|elastic] [--modes LIST]
#                               [--out DIR] [--results docs/results.md] [--from DIR]
#
# --config (default configs/lenet5.toml) sets both sides; --epochs, --batch-size and --augment
# override it on both sides. --modes picks what runs (default whole-step,fast,book,eager,graph):
# whole-step, fast and book are lenet5's kernel sets, whole-step-tf32 the first with
# --precision tf32 (C3 on the tensor cores), eager and graph PyTorch's. With several seeds
# every program trains once per seed (the same seeds on both sides) and the table shows mean and
# minimum accuracy over them.
# --out DIR (new or empty) keeps every program's JSON lines in DIR, and in DIR/run.txt the command,
# the config, the reference kernel set and the date.
# --results FILE writes the table, with the date, the GPU, the commit and the command, into FILE
# between the lines <!-- bench_vs_pytorch.sh: begin --> and <!-- bench_vs_pytorch.sh: end -->
# (docs/results.md holds them, under "Against PyTorch"; scripts/results_block.py). --from DIR
# measures nothing: it makes the table from DIR, an earlier run's --out. BENCH_COMMIT overrides the
# commit named.
# Environment: LENET5 (default build/lenet5), PYTHON (default python3), LENET5_DATA (MNIST folder).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
config=configs/lenet5.toml seeds=1 modes=whole-step,fast,book,eager,graph keep="" results="" from=""
overrides=()  # flags both sides take, over the config
shown=()      # the measuring arguments, for the table's heading
absolute() { case "$1" in /*) echo "$1" ;; *) echo "$PWD/$1" ;; esac; }
while [ $# -gt 0 ]; do
  case "$1" in
    --config) config=$2; shown+=("$1" "$2"); shift 2 ;;
    --epochs|--batch-size|--augment) overrides+=("$1" "$2"); shown+=("$1" "$2"); shift 2 ;;
    --seed|--seeds) seeds=$2; shown+=("$1" "$2"); shift 2 ;;
    --modes) modes=$2; shown+=("$1" "$2"); shift 2 ;;
    --out) keep=$(absolute "$2"); shift 2 ;;
    --results) results=$(absolute "$2"); shift 2 ;;
    --from) from=$(absolute "$2"); shift 2 ;;
    -h|--help) sed -n '2,27p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench_vs_pytorch: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
command="scripts/bench_vs_pytorch.sh${shown[*]:+ ${shown[*]}}"
reference=""  # the first lenet5 kernel set in --modes: the row the others are compared with
for mode in ${modes//,/ }; do
  case "$mode" in
    whole-step|whole-step-tf32|fast|book) [ -n "$reference" ] || reference=$mode ;;
    eager|graph) ;;
    *) echo "bench_vs_pytorch: unknown mode '$mode' (whole-step, whole-step-tf32, fast, book, eager, graph)" >&2; exit 2 ;;
  esac
done
[ -n "$reference" ] || { echo "bench_vs_pytorch: --modes needs a lenet5 kernel set (whole-step, whole-step-tf32, fast or book)" >&2; exit 2; }
lenet5=${LENET5:-build/lenet5}
python=${PYTHON:-python3}
[ -z "$results" ] || "$python" "$root/scripts/results_block.py" --check "$results" bench_vs_pytorch.sh || exit 2
data=${LENET5_DATA:-data/mnist}
wants() { case ",$modes," in *",$1,"*) return 0 ;; *) return 1 ;; esac; }
block=$(mktemp)  # the table and its heading, for results_block.py
trap 'rm -f "$block"' EXIT
if [ -n "$from" ]; then
  [ -f "$from/run.txt" ] && ls "$from"/lenet5-*.jsonl >/dev/null 2>&1 ||
    { echo "bench_vs_pytorch: --from $from: no run.txt and lenet5-*.jsonl there (an earlier run's --out folder)" >&2; exit 2; }
  [ ${#shown[@]} -eq 0 ] && [ -z "$keep" ] ||
    { echo "bench_vs_pytorch: --from remakes an earlier run's table: it takes only --results" >&2; exit 2; }
  out=$from
  command=$(sed -n 1p "$from/run.txt") config=$(sed -n 2p "$from/run.txt")
  reference=$(sed -n 3p "$from/run.txt") measured_on=$(sed -n 4p "$from/run.txt")
elif [ -n "$keep" ]; then
  out=$keep
  # Results appended to an earlier run's would mix the two in one table.
  [ ! -e "$out" ] || [ -z "$(ls -A "$out")" ] ||
    { echo "bench_vs_pytorch: --out $out already holds files: give a new or empty folder" >&2; exit 2; }
  mkdir -p "$out"
else
  out=$(mktemp -d)
  trap 'rm -rf "$out" "$block"' EXIT
fi

if [ -z "$from" ]; then  # the measuring; --from reads what an earlier run kept
  [ -f "$config" ] || { echo "bench_vs_pytorch: no config file '$config' (see --help)" >&2; exit 2; }
  measured_on=$(date +%F)
  printf '%s\n' "$command" "$config" "$reference" "$measured_on" >"$out/run.txt"
  for mode in whole-step whole-step-tf32 fast book; do
    wants "$mode" || continue
    case "$mode" in
      whole-step-tf32) flags=(--kernels whole-step --precision tf32) ;;
      *) flags=(--kernels "$mode") ;;
    esac
    "$lenet5" -q --config "$config" bench --device gpu --data "$data" ${overrides[@]+"${overrides[@]}"} \
      --seeds "$seeds" "${flags[@]}" |
      sed "s/^{/{\"framework\":\"lenet5\",\"mode\":\"$mode\",/" | tee "$out/lenet5-$mode.jsonl"
  done
  if "$python" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
    for mode in eager graph; do
      wants "$mode" || continue
      for seed in ${seeds//,/ }; do
        "$python" scripts/pytorch_peer.py --config "$config" --mode "$mode" --seed "$seed" \
          --data "$data" ${overrides[@]+"${overrides[@]}"} | tee -a "$out/pytorch-$mode.jsonl"
      done
    done
  else
    echo "bench_vs_pytorch: PyTorch with CUDA not found: lenet5 only" >&2
  fi
fi

"$python" - "$out" "$config" "$reference" "$block" "$command" "$measured_on" <<'PY'
import datetime, glob, json, os, statistics, sys
rows, setup = [], None
def mean_of_reached(values):
    reached = [v for v in values if v is not None]
    return (statistics.mean(reached) if len(reached) == len(values) else None), len(reached)
for path in sorted(glob.glob(os.path.join(sys.argv[1], "*.jsonl"))):
    lines = [json.loads(l) for l in open(path) if l.startswith("{")]
    if not lines:
        print(f"bench_vs_pytorch: {path} holds no results (its run failed?): left out", file=sys.stderr)
        continue
    epochs = [l for l in lines if l.get("event") == "epoch"]
    first = lines[0]
    if first["framework"] == "lenet5" and first.get("event") == "setup":
        setup = first
    # lenet5 writes one "seed" line per seed; the PyTorch script one "summary" line per run.
    per_seed_event = "seed" if first["framework"] == "lenet5" else "summary"
    per_seed = [l for l in lines if l.get("event") == per_seed_event]
    medians = [l["median_epoch_s"] for l in per_seed]
    accs = [l["final_test_accuracy"] for l in per_seed]
    t99, reached99 = mean_of_reached([l.get("time_to_99_s") for l in per_seed])
    t992, reached992 = mean_of_reached([l.get("time_to_99_2_s") for l in per_seed])
    peaks = [l.get("peak_allocated_mb", l.get("peak_memory_mb")) for l in per_seed]
    peaks = [p for p in peaks if p is not None]
    rows.append(dict(framework=first["framework"], mode=first["mode"],
                     epoch=statistics.median(medians), ips=None, accs=accs,
                     t99=t99, reached99=reached99, t992=t992, reached992=reached992,
                     peak=max(peaks) if peaks else None, seeds=len(per_seed)))
    steady = [e for e in epochs if e.get("epoch", 1) > 1] or epochs
    rows[-1]["ips"] = statistics.median(e["images_per_s"] for e in steady)
reference = sys.argv[3]
ref = next((r for r in rows if (r["framework"], r["mode"]) == ("lenet5", reference)), None)
if ref is None:
    print(f"bench_vs_pytorch: no results of lenet5 {reference} in {sys.argv[1]}", file=sys.stderr)
    sys.exit(2)
table = [f"{sys.argv[2]}: batch "
         f"{setup['batch_size']}, {setup['epochs']} epochs, augment {setup['augment']}; "
         f"{ref['seeds']} seed(s) per program", "",
         f"| program | kernels / mode | epoch (median, epochs 2+) | images/s | test accuracy (mean, min) | time to 99 % (mean) | time to 99.2 % (mean) | peak memory | lenet5 {reference} is faster by |",
         "|---|---|---|---|---|---|---|---|---|"]
def time_to(r, key):
    return f"{r[key]:.3f} s" if r[key] is not None else f"reached by {r['reached' + key[1:]]} of {r['seeds']} seeds"
for r in rows:
    acc = f"{100*statistics.mean(r['accs']):.2f} %, {100*min(r['accs']):.2f} %"
    peak = f"{r['peak']:.0f} MB" if r["peak"] is not None else "-"
    table.append(f"| {r['framework']} | {r['mode']} | {r['epoch']*1000:.1f} ms | {r['ips']/1000:.0f}k | {acc} | "
                 f"{time_to(r, 't99')} | {time_to(r, 't992')} | {peak} | {r['epoch']/ref['epoch']:.1f}x |")
print("\n" + "\n".join(table))
gpu = setup.get("gpu", setup.get("device", "?")).split(" (")[0]
commit = os.environ.get("BENCH_COMMIT") or setup.get("commit", "?")
heading = (f"Measured on {sys.argv[6] or datetime.date.today().isoformat()} on the {gpu} at {commit} "
           f"(`{sys.argv[5]}`; written by the script):")
with open(sys.argv[4], "w") as block:
    block.write("\n".join([heading, ""] + table) + "\n")
PY
[ -z "$results" ] || "$python" "$root/scripts/results_block.py" "$results" bench_vs_pytorch.sh <"$block"
