#!/usr/bin/env bash
# A roofline of the whole-step training step (cuda/engine/whole_step.cuh) with Nsight Compute:
# trains one short epoch of a config under ncu, profiles a few steps' two kernels (the per-sample
# kernel and the update kernel) in steady state, and prints a table per kernel: time, FP32 FLOP/s,
# DRAM and shared-memory throughput against the GPU's peaks, registers, achieved occupancy and
# what limits it, and the main warp stall reasons. It then splits the measured epoch time into
# kernel time and the rest (launch gaps and waits), from `lenet5 bench`'s median epoch.
#
#   scripts/roofline_whole_step.sh [--config configs/fast.toml] [--batch-size N] [--out DIR]
#                                  [--binary PATH] [--results docs/results.md] [--from DIR]
#
# --results FILE writes the tables, with the date, the GPU and the command, into FILE between the
# lines <!-- roofline_whole_step.sh: begin --> and <!-- roofline_whole_step.sh: end -->
# (docs/results.md holds them), replacing what was there. --from DIR measures nothing: it makes
# the tables from DIR's ncu.csv and bench.json, written there by an earlier run with --out DIR,
# headed with that run's command and date (DIR/run.txt).
#
# Peaks (H200 SXM; override with the environment): FP32_TFLOPS=66.9, DRAM_TBS=4.8. The shared
# memory peak is 128 bytes per SM per cycle at the SM clock ncu reports.
# FLOP counts the executed FP32 instructions (FMA as two), as ncu's roofline does.
# ncu serialises the launches it profiles (no programmatic overlap), here with the caches left warm
# and the clocks as they run (--cache-control none --clock-control none), so the kernel times are those of a step in steady state, run alone.
# Needs a GPU, ncu on PATH, python3, and permission to read the GPU's counters.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
say() { echo "roofline_whole_step: $*" >&2; }
absolute() { case "$1" in /*) echo "$1" ;; *) echo "$PWD/$1" ;; esac; }

config=$root/configs/fast.toml out=$root/roofline binary=$root/build/lenet5 batch="" results="" from=""
[ -n "${LENET5:-}" ] && binary=$(absolute "$LENET5")
while [ $# -gt 0 ]; do
  case "$1" in
    --config) config=$(absolute "$2"); shift 2 ;;
    --batch-size) batch=$2; shift 2 ;;
    --out) out=$(absolute "$2"); shift 2 ;;
    --binary) binary=$(absolute "$2"); shift 2 ;;
    --results) results=$(absolute "$2"); shift 2 ;;
    --from) from=$(absolute "$2"); shift 2 ;;
    -h|--help) sed -n '2,23p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) say "unknown argument '$1' (see --help)"; exit 2 ;;
  esac
done
[ -z "$results" ] || python3 "$root/scripts/results_block.py" --check "$results" roofline_whole_step.sh || exit 2
# The command and the date the tables are headed with: the measuring run's, kept in its --out
# folder's run.txt, so that --from heads them as measured.
command="scripts/roofline_whole_step.sh"
[ "$(basename "$config")" = fast.toml ] || command+=" --config configs/$(basename "$config")"
[ -z "$batch" ] || command+=" --batch-size $batch"
measured_on=$(date +%F)
if [ -n "$from" ]; then
  [ -f "$from/ncu.csv" ] && [ -f "$from/bench.json" ] ||
    { say "--from $from: no ncu.csv and bench.json there (an earlier run's --out folder)"; exit 2; }
  out=$from
  # A folder from before run.txt was kept: the command as given here, and today.
  [ ! -f "$from/run.txt" ] || { command=$(sed -n 1p "$from/run.txt"); measured_on=$(sed -n 2p "$from/run.txt"); }
else
  command -v ncu >/dev/null 2>&1 || { say "ncu (the Nsight Compute CLI) is not on PATH"; exit 1; }
  [ -x "$binary" ] || { say "no lenet5 binary at '$binary' (scripts/setup.sh, or --binary PATH)"; exit 1; }
  mkdir -p "$out"
  printf '%s\n' "$command" "$measured_on" >"$out/run.txt"
fi
batch_flag=()
[ -n "$batch" ] && batch_flag=(--batch-size "$batch")

stalls="barrier long_scoreboard short_scoreboard mio_throttle math_pipe_throttle wait not_selected lg_throttle"
metrics=gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second
metrics+=,sm__sass_thread_inst_executed_op_ffma_pred_on.sum,sm__sass_thread_inst_executed_op_fadd_pred_on.sum
metrics+=,sm__sass_thread_inst_executed_op_fmul_pred_on.sum,dram__bytes.sum
metrics+=,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed
metrics+=,launch__registers_per_thread,launch__occupancy_limit_registers,launch__occupancy_limit_shared_mem
metrics+=,sm__warps_active.avg.pct_of_peak_sustained_active,launch__grid_size,device__attribute_multiprocessor_count
for s in $stalls; do metrics+=,smsp__average_warps_issue_stalled_${s}_per_issue_active.ratio; done

# Steps 20-23 of the epoch (after the first steps): two launches each.
if [ -z "$from" ]; then
say "profiling with ncu (about a minute)"
ncu --csv --page raw --cache-control none --clock-control none --kernel-name regex:whole_step --launch-skip 40 \
    --launch-count 8 --metrics "$metrics" \
    "$binary" -q train --config "$config" "${batch_flag[@]}" --epochs 1 --evaluate false \
    --out "$out/run-ncu" > "$out/ncu.csv" 2> "$out/ncu.log" || {
  say "ncu failed (log: $out/ncu.log)"; tail -5 "$out/ncu.log" >&2; exit 1; }
rm -rf "$out/run-ncu"
say "timing epochs with lenet5 bench"
"$binary" -q bench --config "$config" "${batch_flag[@]}" --epochs 4 --seeds 1 --evaluate false \
  > "$out/bench.json" 2> "$out/bench.log" || { say "lenet5 bench failed:"; tail -5 "$out/bench.log" >&2; exit 1; }
fi

# The block for --results: the heading and the tables, written by results_block.py.
block=$(mktemp)
trap 'rm -f "$block"' EXIT
python3 - "$out/ncu.csv" "$out/bench.json" "${FP32_TFLOPS:-66.9}" "${DRAM_TBS:-4.8}" "$stalls" \
  "$block" "$command" "$measured_on" <<'EOF'
import csv, json, os, re, statistics, sys
path, bench_path, fp32_peak, dram_peak, stalls, block_path, command, measured_on = sys.argv[1:9]
report = []
def emit(text=""): report.append(text)
fp32_peak, dram_peak, stalls = float(fp32_peak) * 1e12, float(dram_peak) * 1e12, stalls.split()
lines = [l for l in open(path) if l.startswith('"')]
rows = list(csv.DictReader(lines))
rows = [r for r in rows if r.get("ID", "").isdigit()]  # the units row has no ID
def num(r, k):
    v = r.get(k, "").replace(",", "")
    try: return float(v)
    except ValueError: return float("nan")
kinds = {}
for r in rows:
    name = "sample kernel" if "sample" in r["Kernel Name"] else "update kernel"
    kinds.setdefault(name, []).append(r)
def median(rs, k): return statistics.median(num(r, k) for r in rs)
emit("| kernel | time per launch | FP32 | of peak | DRAM | of peak | shared memory | of peak | SM busy | registers | occupancy (achieved; limit by registers, shared memory) | main stalls (cycles per issued instruction) |")
emit("|---|---|---|---|---|---|---|---|---|---|---|---|")
kernel_us = 0.0
for name in ("sample kernel", "update kernel"):
    rs = kinds.get(name, [])
    if not rs: continue
    t = median(rs, "gpu__time_duration.sum") * 1e-9  # ns
    flop = 2 * median(rs, "sm__sass_thread_inst_executed_op_ffma_pred_on.sum") + \
        median(rs, "sm__sass_thread_inst_executed_op_fadd_pred_on.sum") + \
        median(rs, "sm__sass_thread_inst_executed_op_fmul_pred_on.sum")
    dram = median(rs, "dram__bytes.sum")
    sms = median(rs, "device__attribute_multiprocessor_count")
    clock = median(rs, "sm__cycles_elapsed.avg.per_second")
    shared = median(rs, "l1tex__data_pipe_lsu_wavefronts_mem_shared.sum") * 128  # bytes per wavefront
    shared_peak = 128 * sms * clock
    stall = sorted(((median(rs, f"smsp__average_warps_issue_stalled_{s}_per_issue_active.ratio"), s)
                    for s in stalls), reverse=True)[:3]
    kernel_us += t * 1e6
    emit(f"| {name} | {t*1e6:.1f} µs | {flop/t/1e12:.2f} TFLOP/s | {100*flop/t/fp32_peak:.0f} % "
          f"| {dram/t/1e9:.0f} GB/s | {100*dram/t/dram_peak:.1f} % "
          f"| {shared/t/1e12:.2f} TB/s | {100*shared/t/shared_peak:.0f} % "
          f"| {median(rs, 'sm__throughput.avg.pct_of_peak_sustained_elapsed'):.0f} % "
          f"| {median(rs, 'launch__registers_per_thread'):.0f} "
          f"| {median(rs, 'sm__warps_active.avg.pct_of_peak_sustained_active'):.0f} %; "
          f"{median(rs, 'launch__occupancy_limit_registers'):.0f}, {median(rs, 'launch__occupancy_limit_shared_mem'):.0f} blocks/SM "
          f"| " + ", ".join(f"{s.replace('_', ' ')} {v:.1f}" for v, s in stall) + " |")
events = [json.loads(l) for l in open(bench_path) if l.startswith("{")]
setup = next(e for e in events if e.get("event") == "setup")
seed = next(e for e in events if e.get("event") == "seed")
images = int(setup["train_images"]) or 60000  # 0: the whole training set
steps = -(-images // int(setup["batch_size"]))
epoch_ms = 1e3 * seed["median_epoch_s"]
kernels_ms = kernel_us * steps / 1e3
emit()
emit(f"The epoch (lenet5 bench, median of epochs 2-4): {epoch_ms:.1f} ms for {steps} steps of "
      f"{setup['batch_size']}, {1e3 * epoch_ms / steps:.1f} µs a step; the two kernels run one "
      f"after the other: {kernel_us:.1f} µs a step, {kernels_ms:.1f} ms an epoch.")
if kernels_ms <= epoch_ms:
    emit(f"The rest of the epoch, {epoch_ms - kernels_ms:.1f} ms "
          f"({100 * (epoch_ms - kernels_ms) / epoch_ms:.0f} %), is launch gaps and waits.")
else:
    emit(f"The epoch is {100 * (1 - epoch_ms / kernels_ms):.0f} % shorter than the kernels run "
          f"one after the other: programmatic launch starts each kernel while the previous one "
          f"drains, so the gaps are hidden and the kernels themselves bound the step.")

gpu = setup.get("gpu", setup.get("device", "?")).split(" (")[0]
commit = os.environ.get("ROOFLINE_COMMIT") or setup.get("commit", "?")
heading = (f"Measured on {measured_on} on the {gpu} at {commit} (`{command}`; "
           f"peaks {float(sys.argv[3]):g} TFLOP/s FP32, {float(sys.argv[4]):g} TB/s DRAM, 128 bytes of "
           f"shared memory per SM per cycle; written by the script):")
print("\n".join(report))
with open(block_path, "w") as block:
    block.write("\n".join([heading, ""] + report) + "\n")
EOF
[ -z "$results" ] || python3 "$root/scripts/results_block.py" "$results" roofline_whole_step.sh <"$block"
