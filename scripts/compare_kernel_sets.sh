#!/usr/bin/env bash
# Compares lenet5's kernel sets on one GPU in one run, against the targets of the tensor-core set
# (docs/tensor-cores.md): for each config of --configs and each kernel set of --kernels (a set's
# name, or NAME:PRECISION for a --precision of its own), runs `lenet5 -q bench --config C
# --kernels K [--precision P] --seeds S --device gpu`, then prints a Markdown table
# (per config and kernel set: every seed's final test accuracy, their mean and minimum, every
# seed's time to 99 %, the epoch) and, per config, a verdict on each target for every other
# kernel set against the first one in --kernels (the reference, whole-step by default):
#   - the mean accuracy within 0.05 points of the reference's mean (either way);
#   - no seed more than 0.1 points below the reference's lowest seed;
#   - fast.toml only: time to 99 % at most 0.06 s on every seed;
#   - the epoch (the median over the seeds of bench's median_epoch_s: epochs 2 and later,
#     augmentation included) at most 5 ms for fast.toml, 8 ms for lenet5.toml.
# Each says "met" or "not met", with its value. The exit status is 0 whatever the verdicts, 1 when
# a run fails, 2 for a wrong argument.
#
#   scripts/compare_kernel_sets.sh [--configs configs/lenet5.toml,configs/fast.toml]
#                                  [--kernels whole-step,tensor:fp32,tensor:tf32,tensor:bf16]
#                                  [--seeds 1,2,3,4,5] [--out DIR]
#                                  [--results docs/results.md] [--from DIR] [-- extra bench flags]
#
# --out DIR (new or empty) keeps each run's JSON lines as DIR/CONFIG-KERNELS.jsonl (its log
# beside it, .log) and DIR/run.txt (the command, the date, the runs). --results FILE writes the
# table and the verdicts, with the date, the GPU, the commit and the command, into FILE between
# the lines <!-- compare_kernel_sets.sh: begin --> and <!-- compare_kernel_sets.sh: end -->
# (docs/results.md holds them; scripts/results_block.py). --from DIR measures nothing, needs no
# GPU, and takes only --results: it remakes the table from DIR, an earlier run's --out.
# Flags after -- go to every bench run (`-- --epochs 2` checks the script quickly; the
# targets then mean nothing).
# Environment: LENET5 (default build/lenet5), LENET5_DATA (MNIST folder, default data/mnist),
# RESULTS_COMMIT (the commit the heading names, where the binary's own version was stamped from
# another checkout than the one measured).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
say() { echo "compare_kernel_sets: $*" >&2; }
absolute() { case "$1" in /*) echo "$1" ;; *) echo "$PWD/$1" ;; esac; }

configs=configs/lenet5.toml,configs/fast.toml kernels=whole-step,tensor:fp32,tensor:tf32,tensor:bf16
seeds=1,2,3,4,5
keep="" results="" from="" shown=() extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --configs) configs=$2; shown+=("$1" "$2"); shift 2 ;;
    --kernels) kernels=$2; shown+=("$1" "$2"); shift 2 ;;
    --seeds) seeds=$2; shown+=("$1" "$2"); shift 2 ;;
    --out) keep=$(absolute "$2"); shift 2 ;;
    --results) results=$(absolute "$2"); shift 2 ;;
    --from) from=$(absolute "$2"); shift 2 ;;
    --) shift; extra=("$@"); shown+=(-- "$@"); break ;;
    -h|--help) sed -n '2,30p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) say "unknown argument '$1' (see --help)"; exit 2 ;;
  esac
done
command="scripts/compare_kernel_sets.sh${shown[*]:+ ${shown[*]}}"
[ -z "$results" ] || python3 "$root/scripts/results_block.py" --check "$results" compare_kernel_sets.sh || exit 2
block=$(mktemp)  # the table and verdicts with their heading, for results_block.py
trap 'rm -f "$block"' EXIT

if [ -n "$from" ]; then
  [ -f "$from/run.txt" ] ||
    { say "--from $from: no run.txt there (give the --out folder of an earlier run)"; exit 2; }
  if [ ${#shown[@]} -gt 0 ] || [ -n "$keep" ]; then
    say "--from remakes an earlier run's table: it takes only --results"; exit 2
  fi
  out=$from
else
  [[ $seeds =~ ^[0-9]+(,[0-9]+)*$ ]] || { say "--seeds '$seeds': give seeds separated by commas, e.g. 1,2,3,4,5"; exit 2; }
  [[ $kernels =~ ^[a-z0-9-]+(:[a-z0-9]+)?(,[a-z0-9-]+(:[a-z0-9]+)?)+$ ]] ||
    { say "--kernels '$kernels': give two or more kernel sets separated by commas, the reference first, each a name or NAME:PRECISION (e.g. whole-step,tensor:tf32)"; exit 2; }
  lenet5=${LENET5:-$root/build/lenet5}
  [ -x "$lenet5" ] || { say "no lenet5 binary at '$lenet5' (build it: scripts/setup.sh; or set LENET5 to it)"; exit 1; }
  data=${LENET5_DATA:-$root/data/mnist}
  # lenet5 reads each file plain or gzipped, as scripts/fetch_mnist.sh leaves them.
  [ -f "$data/t10k-images-idx3-ubyte" ] || [ -f "$data/t10k-images-idx3-ubyte.gz" ] ||
    { say "no MNIST in '$data' (fetch it: scripts/fetch_mnist.sh $data; or set LENET5_DATA to the folder that holds it)"; exit 1; }
  paths=() names=()
  for config in ${configs//,/ }; do  # as given, else from the repository's root
    if [ -f "$config" ]; then paths+=("$(absolute "$config")")
    elif [ -f "$root/$config" ]; then paths+=("$root/$config")
    else say "--configs: no config file '$config' (e.g. configs/fast.toml)"; exit 2; fi
    name=$(basename "$config" .toml)
    case " ${names[*]} " in *" $name "*) say "--configs: two configs named $name.toml"; exit 2 ;; esac
    names+=("$name")
  done
  if [ -n "$keep" ]; then
    # Runs added to an earlier run's would mix two runs in one table.
    [ ! -e "$keep" ] || [ -z "$(ls -A "$keep")" ] ||
      { say "--out $keep already holds files: give a new or empty folder"; exit 2; }
    mkdir -p "$keep"
    out=$keep
  else
    out=$(mktemp -d)
    trap 'rm -rf "$out" "$block"' EXIT
  fi
  printf '%s\n' "$command" "$(date +%F)" >"$out/run.txt"
  i=0
  for config in ${configs//,/ }; do
    for set in ${kernels//,/ }; do
      run=${names[$i]}-${set/:/-}
      precision=()  # NAME:PRECISION: the set with --precision PRECISION
      [[ $set != *:* ]] || precision=(--precision "${set#*:}")
      say "$config, --kernels $set, seeds $seeds"
      "$lenet5" -q bench --config "${paths[$i]}" --kernels "${set%%:*}" ${precision[@]+"${precision[@]}"} \
        --seeds "$seeds" --device gpu --data "$data" ${extra[@]+"${extra[@]}"} \
        >"$out/$run.jsonl" 2>"$out/$run.log" || {
        say "lenet5 bench failed for $config with --kernels $set (exit $?); the end of its log:"
        tail -5 "$out/$run.log" >&2; exit 1; }
      printf '%s\t%s\t%s\n' "$config" "$set" "$run.jsonl" >>"$out/run.txt"
    done
    i=$((i + 1))
  done
fi

python3 - "$out" "$block" <<'PY'
import json, os, statistics, sys
out, block_path = sys.argv[1:3]
def fail(message):
    print(f"compare_kernel_sets: {message}", file=sys.stderr)
    sys.exit(2)
lines = open(os.path.join(out, "run.txt"), encoding="utf-8").read().splitlines()
if len(lines) < 3:
    fail(f"{out}/run.txt lists no runs (its run failed before the first bench ended?)")
command, measured_on = lines[0], lines[1]
# Issue 44's targets by config file name; the accuracy targets apply to every config.
targets = {"fast.toml": {"t99_s": 0.06, "epoch_ms": 5}, "lenet5.toml": {"epoch_ms": 8}}
runs, configs, sets = {}, [], []
for line in lines[2:]:
    config, kernels, name = line.split("\t")
    path = os.path.join(out, name)
    try:
        events = [json.loads(l) for l in open(path, encoding="utf-8") if l.startswith("{")]
    except OSError:
        fail(f"{path} is missing ({out}/run.txt names it)")
    setup = next((e for e in events if e.get("event") == "setup"), None)
    seeds = [e for e in events if e.get("event") == "seed"]
    if setup is None or not seeds:
        fail(f"{path} has no setup and seed lines of lenet5 bench")
    accs = [s["final_test_accuracy"] for s in seeds]
    have = [100 * a for a in accs if a is not None]
    runs[config, kernels] = dict(
        setup=setup, seeds=[s["seed"] for s in seeds], accs=accs, t99=[s["time_to_99_s"] for s in seeds],
        mean=statistics.mean(have) if have else None, min=min(have) if have else None,
        epoch_ms=1000 * statistics.median(s["median_epoch_s"] for s in seeds))
    configs += [config] if config not in configs else []
    sets += [kernels] if kernels not in sets else []
reference = sets[0]

def pct(v): return "-" if v is None else f"{v:.2f}"
def each(values, form): return ", ".join("-" if v is None else form(v) for v in values)
first = next(iter(runs.values()))
report = [f"| config | kernels | final test accuracy, seeds {', '.join(map(str, first['seeds']))} (%) "
          "| mean (%) | min (%) | time to 99 %, per seed (s) | epoch (ms) |",
          "|---|---|---|---|---|---|---|"]
for config in configs:
    for kernels in sets:
        r = runs[config, kernels]
        s = r["setup"]
        report.append(f"| {config} (batch {s['batch_size']}, {s['epochs']} epochs) | {kernels} "
                      f"| {each(r['accs'], lambda a: f'{100 * a:.2f}')} | {pct(r['mean'])} | {pct(r['min'])} "
                      f"| {each(r['t99'], lambda t: f'{t:.3f}')} | {r['epoch_ms']:.1f} |")
report += ["", "Final test accuracy: the last epoch's. Time to 99 %: training seconds (evaluation "
           "excluded) to the end of the first epoch at 99 %; \"-\": never reached. Epoch: the median "
           "over the seeds of each seed's median epoch (epochs 2 and later, augmentation included)."]

def verdict(met, value): return f"{'met' if met else 'not met'} ({value})"
EPS = 1e-9  # accuracies are whole images of 10,000: multiples of 0.01 points
for config in configs:
    target = targets.get(os.path.basename(config), {})
    ref = runs[config, reference]
    for kernels in sets[1:]:
        r = runs[config, kernels]
        report += ["", f"{config}, {kernels} against {reference}:"]
        if r["mean"] is None or ref["mean"] is None or None in r["accs"] + ref["accs"]:
            report.append("- accuracy: not met (a seed has no test accuracy: was the run evaluated?)")
        else:
            diff, low = r["mean"] - ref["mean"], r["min"] - ref["min"]
            report.append(f"- mean accuracy within 0.05 points of {reference}'s {ref['mean']:.3f} %: "
                          + verdict(abs(diff) <= 0.05 + EPS, f"{r['mean']:.3f} %, {diff:+.3f} points"))
            report.append(f"- no seed more than 0.1 points below {reference}'s lowest, {ref['min']:.2f} %: "
                          + verdict(low >= -0.1 - EPS, f"lowest {r['min']:.2f} %, {low:+.2f} points"))
        if "t99_s" in target:
            limit = target["t99_s"]
            late = [f"seed {s}: {'never' if t is None else f'{t:.4f} s'}"
                    for s, t in zip(r["seeds"], r["t99"]) if t is None or t > limit]
            slowest = max((t for t in r["t99"] if t is not None), default=None)
            report.append(f"- time to 99 % at most {limit:g} s on every seed: " + verdict(
                not late, "; ".join(late) if late else f"slowest {slowest:.4f} s"))
        if "epoch_ms" in target:
            report.append(f"- epoch at most {target['epoch_ms']:g} ms: "
                          + verdict(r["epoch_ms"] <= target["epoch_ms"], f"{r['epoch_ms']:.2f} ms"))

gpu = first["setup"].get("gpu", first["setup"].get("device", "?")).split(" (")[0]
commit = os.environ.get("RESULTS_COMMIT") or first["setup"].get("commit", "?")
heading = (f"Measured on {measured_on} on the {gpu} at {commit} "
           f"(`{command}`; written by the script):")
print("\n".join(report))
with open(block_path, "w", encoding="utf-8") as block:
    block.write("\n".join([heading, ""] + report) + "\n")
PY
[ -z "$results" ] || python3 "$root/scripts/results_block.py" "$results" compare_kernel_sets.sh <"$block"
