#!/usr/bin/env bash
# A roofline of a GPU training step with Nsight Compute: trains one short epoch of a config under
# ncu, profiles a few steps' kernels in steady state, and prints a table per kernel: time, FP32
# FLOP/s, DRAM and shared-memory throughput against the GPU's peaks, registers, achieved occupancy
# and what limits it, and the main warp stall reasons. It then splits the measured epoch time into
# kernel time and the rest (launch gaps and waits), from `lenet5 bench`'s median epoch.
#
#   scripts/roofline_whole_step.sh [--kernels whole-step|tensor] [--config configs/fast.toml]
#                                  [--batch-size N] [--precision fp32|tf32|bf16] [--out DIR]
#                                  [--binary PATH]
#                                  [--results docs/results.md] [--from DIR]
#
# --kernels picks the kernel set whose step is profiled (lenet5's --kernels):
#   whole-step (the default): the whole-step step (cuda/engine/whole_step.cuh), its two kernels,
#     the per-sample kernel and the update kernel;
#   tensor: `lenet5 train --kernels tensor`'s step (gpu_engine.cu's tensor_step): the gather, the
#     tensor cores' gradient (cuda/engine/tensor_backward.cuh: conv forward, dense backward, conv
#     backward, and a gradient sum after each backward kernel), the loss statistics and SGD's
#     update, a row per kernel (the two gradient sums told apart by their grids), with the tensor
#     pipe's columns added: its utilisation, the mma.sync instructions and the FLOP/s they make
#     against the peak of their operands' type (TF32, or BF16 for --precision bf16).
# --precision P trains with lenet5's --precision P (without it, the config's): the tensor set's
# fp32 issues three TF32 mma.sync per tile product, each counted in the TF32 columns; bf16 is
# counted against the BF16 peak, and profiles only --kernels tensor (the only set that has it).
# --results FILE writes the tables, with the date, the GPU and the command, into FILE between the
# lines <!-- NAME: begin --> and <!-- NAME: end -->, NAME roofline_whole_step.sh for whole-step and
# roofline_tensor for tensor (docs/results.md holds both), replacing what was there. --out DIR
# (default roofline/, or roofline-tensor/ for tensor) keeps the run's files. --from DIR measures
# nothing: it makes the tables from DIR's ncu.csv and bench.json, written there by an earlier run
# with --out DIR, headed with that run's command and date (DIR/run.txt); without --kernels, the set
# is the one that run measured (its bench.json says).
#
# Peaks (H200 SXM; override with the environment): FP32_TFLOPS=66.9, DRAM_TBS=4.8, and for tensor
# TF32_TFLOPS=494.7 and BF16_TFLOPS=989.4 (dense, no sparsity). The shared memory peak is 128 bytes per SM per cycle at
# the SM clock ncu reports. FP32 FLOP counts the executed FP32 instructions (FMA as two), as ncu's
# roofline does; TF32 FLOP counts 2 x 16 x 8 x 8 = 2048 per mma.sync.m16n8k8 (cuda/engine/
# tensor_mma.cuh, the only tensor instruction these kernels issue).
# ncu serialises the launches it profiles (no programmatic overlap), here with the caches left warm
# and the clocks as they run (--cache-control none --clock-control none), so the kernel times are those of a step in steady state, run alone.
# Needs a GPU, ncu on PATH, python3, and permission to read the GPU's counters.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
say() { echo "roofline_whole_step: $*" >&2; }
absolute() { case "$1" in /*) echo "$1" ;; *) echo "$PWD/$1" ;; esac; }

config=$root/configs/fast.toml out="" binary=$root/build/lenet5 batch="" results="" from="" kernels=""
precision=""
[ -n "${LENET5:-}" ] && binary=$(absolute "$LENET5")
while [ $# -gt 0 ]; do
  case "$1" in
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    --kernels|--config|--batch-size|--precision|--out|--binary|--results|--from)
      [ $# -ge 2 ] || { say "$1 needs a value (see --help)"; exit 2; } ;;
  esac
  case "$1" in
    --kernels)
      case "$2" in whole-step|tensor) kernels=$2 ;;
        *) say "--kernels takes whole-step or tensor, not '$2'"; exit 2 ;; esac
      shift 2 ;;
    --config) config=$(absolute "$2"); shift 2 ;;
    --batch-size) batch=$2; shift 2 ;;
    --precision)
      case "$2" in fp32|tf32|bf16) precision=$2 ;;
        *) say "--precision takes fp32, tf32 or bf16, not '$2'"; exit 2 ;; esac
      shift 2 ;;
    --out) out=$(absolute "$2"); shift 2 ;;
    --binary) binary=$(absolute "$2"); shift 2 ;;
    --results) results=$(absolute "$2"); shift 2 ;;
    --from) from=$(absolute "$2"); shift 2 ;;
    *) say "unknown argument '$1' (see --help)"; exit 2 ;;
  esac
done
# --from: the set the earlier run measured, from its bench.json's setup line (runs from before
# --kernels measured whole-step). Tables of one set must not go into the other set's block.
recorded=""
if [ -n "$from" ] && [ -f "$from/bench.json" ]; then
  recorded=$(python3 -c 'import json, sys
for line in open(sys.argv[1]):
    if line.startswith("{") and json.loads(line).get("event") == "setup":
        print(json.loads(line).get("kernels", "")); break' "$from/bench.json" 2>/dev/null) || recorded=""
fi
if [ -z "$kernels" ]; then
  kernels=${recorded:-whole-step}
  case "$kernels" in whole-step|tensor) ;;
    *) say "--from $from: that run measured --kernels $kernels (its bench.json), which this script does not profile"; exit 2 ;;
  esac
elif [ -n "$recorded" ] && [ "$recorded" != "$kernels" ]; then
  say "--from $from: that run measured --kernels $recorded (its bench.json), not $kernels: give --kernels $recorded, or leave it out"
  exit 2
fi

if [ "$precision" = bf16 ] && [ "$kernels" != tensor ]; then
  say "--precision bf16 trains with --kernels tensor only: give --kernels tensor"; exit 2
fi

# What each set's step launches, and the ncu filter that catches those launches and no others.
# The skip and the count are whole steps (20 steps in, 4 steps profiled), so each kernel of the
# step is profiled 4 times whatever launch the window starts at; the table counts the launches a
# step from the data (the kernel launched fewest times is taken as once a step).
case "$kernels" in
  whole-step)
    # The sample kernel (whole_step_sample_kernel1 or 2) and whole_step_update_kernel: 2 a step.
    marker=roofline_whole_step.sh filter='regex:whole_step' per_step=2
    ;;
  tensor)
    # 6 a step (gpu_engine.cu's tensor_steps, TensorBackward::train_step): the batch's gather
    # (gather_augmented_batch_kernel or gather_batch_kernel1, a launch a step on a side stream since
    # f1555f7, since 2026-12-02 behind the step before's tensor_conv_forward_kernel2; a launch every
    # four steps from be7527b to f1555f7), then tensor_conv_forward_kernel2 (which gathered the
    # batch itself from 42b16b6 to 60291af; before it, tensor_conv_forward_kernel1 read a field that
    # gather_batch_kernel1 or gather_augmented_batch_kernel had written, a launch of its own),
    # tensor_dense_forward_kernel3 (a cluster of 4 blocks a tile; kernel2, a block a tile, before),
    # tensor_s4_gradient_kernel1 (dL/dS4), tensor_conv_backward_kernel2 (with the dense weight
    # gradients, their SGD update and the step's loss statistics in blocks after its samples' since
    # 288afed; before, tensor_step_gradient_kernel1 ran them), tensor_step_gradient_kernel1 (the
    # convolutions' per-sample slots summed, with SGD's update of the convolutions' parameters as
    # each gradient is written; before it, tensor_dense_gradient_kernel1 computed the dense weight
    # gradients and dL/dS4 before the convolutions' backward and tensor_gradient_sum_kernel3 summed
    # and updated after it, and before 46a6f72 sgd_step_kernel1 made another launch, which the
    # filter still catches). Where the batch has more samples than the GPU has SMs, 5 a step:
    # tensor_conv_backward_kernel2 adds the slots itself (TensorBackward's SlotSum), and the
    # profile's window, counted in launches of 6, holds whole steps and a part, which the counting
    # below rounds down. Any tensor_ kernel is caught, so that a kernel renamed or split in
    # cuda/engine/ still shows.
    marker=roofline_tensor per_step=6
    filter='regex:tensor_|gather_(augmented_)?batch_kernel|sgd_step_kernel'
    ;;
esac
skip=$((20 * per_step)) count=$((4 * per_step))
[ -n "$out" ] || { out=$root/roofline; [ "$kernels" = whole-step ] || out+=-$kernels; }
[ -z "$results" ] || python3 "$root/scripts/results_block.py" --check "$results" "$marker" || exit 2
# The command and the date the tables are headed with: the measuring run's, kept in its --out
# folder's run.txt, so that --from heads them as measured.
command="scripts/roofline_whole_step.sh"
[ "$kernels" = whole-step ] || command+=" --kernels $kernels"
[ "$(basename "$config")" = fast.toml ] || command+=" --config configs/$(basename "$config")"
[ -z "$batch" ] || command+=" --batch-size $batch"
[ -z "$precision" ] || command+=" --precision $precision"
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
[ -n "$precision" ] && batch_flag+=(--precision "$precision")

stalls="barrier long_scoreboard short_scoreboard mio_throttle math_pipe_throttle wait not_selected lg_throttle"
metrics=gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second
metrics+=,sm__sass_thread_inst_executed_op_ffma_pred_on.sum,sm__sass_thread_inst_executed_op_fadd_pred_on.sum
metrics+=,sm__sass_thread_inst_executed_op_fmul_pred_on.sum,dram__bytes.sum
metrics+=,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed
metrics+=,launch__registers_per_thread,launch__occupancy_limit_registers,launch__occupancy_limit_shared_mem
metrics+=,sm__warps_active.avg.pct_of_peak_sustained_active,launch__grid_size,device__attribute_multiprocessor_count
for s in $stalls; do metrics+=,smsp__average_warps_issue_stalled_${s}_per_issue_active.ratio; done
# The tensor pipe (tensor only): the HMMA pipe's active cycles against its peak over the SMs'
# active cycles; the HMMA instructions executed, counted per warp-level instruction as every
# inst_executed metric is (one mma.sync.m16n8k8 TF32 of a warp is one HMMA.1688 in SASS), from
# which the table makes the FLOP; and ncu's own count of TF32 (or BF16) tensor ops, to check that
# factor against. Names as ncu lists them for Ampere and Hopper; a name this ncu or GPU does not
# have would fail the whole run, so each is asked for only where `ncu --query-metrics` lists it,
# and its columns read n/a otherwise.
tensor_metrics="sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active"
tensor_metrics+=" sm__inst_executed_pipe_tensor_op_hmma.sum sm__ops_path_tensor_src_tf32_dst_fp32.sum"
tensor_metrics+=" sm__ops_path_tensor_src_bf16_dst_fp32.sum"

if [ -z "$from" ]; then
if [ "$kernels" = tensor ]; then
  # The base names (what precedes the first dot); an empty list (the query failed) asks for all.
  known=$(ncu --query-metrics 2>/dev/null | awk '{ print $1 }') || known=""
  for m in $tensor_metrics; do
    if [ -z "$known" ] || grep -qxF "${m%%.*}" <<<"$known"; then metrics+=,$m
    else say "ncu lists no metric ${m%%.*} for this GPU: its column reads n/a"; fi
  done
fi
say "profiling $kernels's step with ncu (about a minute): launches $skip to $((skip + count - 1)) that match $filter"
ncu --csv --page raw --cache-control none --clock-control none --kernel-name "$filter" \
    --launch-skip "$skip" --launch-count "$count" --metrics "$metrics" \
    "$binary" -q train --config "$config" "${batch_flag[@]}" --kernels "$kernels" --epochs 1 \
    --evaluate false --out "$out/run-ncu" > "$out/ncu.csv" 2> "$out/ncu.log" || {
  say "ncu failed (log: $out/ncu.log)"; tail -5 "$out/ncu.log" >&2; exit 1; }
rm -rf "$out/run-ncu"
say "timing epochs with lenet5 bench"
"$binary" -q bench --config "$config" "${batch_flag[@]}" --kernels "$kernels" --epochs 4 --seeds 1 \
  --evaluate false > "$out/bench.json" 2> "$out/bench.log" || {
  say "lenet5 bench failed:"; tail -5 "$out/bench.log" >&2; exit 1; }
fi

# The block for --results: the heading and the tables, written by results_block.py.
block=$(mktemp)
trap 'rm -f "$block"' EXIT
python3 - "$out/ncu.csv" "$out/bench.json" "$kernels" "${FP32_TFLOPS:-66.9}" "${DRAM_TBS:-4.8}" \
  "${TF32_TFLOPS:-494.7}" "$stalls" "$block" "$command" "$measured_on" "${BF16_TFLOPS:-989.4}" <<'EOF'
import csv, json, math, os, re, statistics, sys
(path, bench_path, kernels, fp32_peak, dram_peak, tf32_peak, stalls, block_path, command,
 measured_on, bf16_peak) = sys.argv[1:12]
tensor = kernels == "tensor"
report = []
def emit(text=""): report.append(text)
def fail(text):
    print(f"roofline_whole_step: {text}", file=sys.stderr)
    sys.exit(1)
events = [json.loads(l) for l in open(bench_path) if l.startswith("{")]
setup = next((e for e in events if e.get("event") == "setup"), None)
seed = next((e for e in events if e.get("event") == "seed"), None)
if setup is None or seed is None:
    fail(f"{bench_path} has no setup and seed lines: not `lenet5 bench`'s output (see bench.log)")
# The tensor cores' operand type: BF16 for --precision bf16, else TF32 (fp32's three products a
# tile are TF32 too; runs from before --precision reached the tensor set trained in TF32).
bf16 = tensor and setup.get("precision") == "bf16"
operands = "BF16" if bf16 else "TF32"
ops_metric = f"sm__ops_path_tensor_src_{operands.lower()}_dst_fp32.sum"
tensor_peak = bf16_peak if bf16 else tf32_peak
peaks = [f"{float(fp32_peak):g} TFLOP/s FP32"] + \
    ([f"{float(tensor_peak):g} TFLOP/s {operands} (dense)"] if tensor else []) + \
    [f"{float(dram_peak):g} TB/s DRAM"]
fp32_peak, dram_peak, tensor_peak = (float(v) * 1e12 for v in (fp32_peak, dram_peak, tensor_peak))
stalls = stalls.split()
lines = [l for l in open(path) if l.startswith('"')]
rows = list(csv.DictReader(lines))
rows = [r for r in rows if r.get("ID", "").isdigit()]  # the units row has no ID
rows.sort(key=lambda r: int(r["ID"]))
if not rows:
    fail(f"{path} holds no kernel launches: ncu matched none (is the filter's kernel set the one "
         "the binary ran? see ncu.log beside it)")
if "gpu__time_duration.sum" not in rows[0]:
    fail(f"{path} has no gpu__time_duration.sum column: not the CSV of this script's ncu run")
def num(r, k):  # NaN where ncu did not measure the metric (absent column, "n/a")
    v = r.get(k, "").replace(",", "")
    try: return float(v)
    except ValueError: return float("nan")
def median(rs, k):
    values = [v for v in (num(r, k) for r in rs) if not math.isnan(v)]
    return statistics.median(values) if values else float("nan")
def show(value, form, unit=""):  # n/a for a metric this ncu or GPU did not give
    return "n/a" if math.isnan(value) else f"{value:{form}}{unit}"

# A kernel's name as its source declares it: ncu prints the demangled signature (the return type,
# the namespaces, anonymous ones included, the template arguments and the parameters), which these
# strip.
def base(name):
    name = name.replace("(anonymous namespace)", "").replace("<unnamed>", "")
    name = re.split(r"[<(]", name, 1)[0].split()
    return name[-1].split("::")[-1] if name else "?"
def label(r):
    if tensor: return base(r["Kernel Name"])
    return "sample kernel" if "sample" in r["Kernel Name"] else "update kernel"
# A row per kernel and grid, in the order of the profiled launches (the step's, when the window
# starts at a step's first launch): a kernel launched twice a step with two grids (as the gradient
# sum was, for the dense and the convolutions' slots, before be12dbd) gets a row for each.
groups, before = {}, {}
for i, r in enumerate(rows):
    key = (label(r), r.get("launch__grid_size", "").replace(",", ""))
    groups.setdefault(key, []).append(r)
    if i > 0: before.setdefault(key, []).append(label(rows[i - 1]))
profiled = min(len(rs) for rs in groups.values())  # steps: the kernel launched least, once a step
# A window that is not whole steps (a step's launch count above not the kernels' own: the window
# then starts mid-step and ends past its last whole step) profiles some kernels up to once more
# than whole steps would: each kernel's launches a step are rounded down, which is right while the
# window holds at least two whole steps, and its time is the median of all its launches.
per_step = {key: len(rs) // profiled for key, rs in groups.items()}
whole = all(len(rs) == per_step[key] * profiled for key, rs in groups.items())
if not whole and profiled < 2:
    fail("the profile is not whole steps and holds one launch of some kernel: too few to tell "
         "a step's launches (measure again; the script profiles four steps)")
if not whole:
    print("roofline_whole_step: the profiled launches are not a whole number of steps "
          f"({', '.join(f'{k[0]} {len(rs)}' for k, rs in groups.items())}): each kernel's "
          "launches a step are rounded down (the table's order starts where the window did)",
          file=sys.stderr)
def name(key):
    text = f"`{key[0]}`" if tensor else key[0]
    if sum(1 for k in groups if k[0] == key[0]) > 1:
        follows = before.get(key)
        text += f" ({int(float(key[1])):,} blocks" if key[1] else " ("
        if follows: text += f", after `{max(set(follows), key=follows.count)}`"
        text += ")"
    n = per_step[key]
    return text + (f" ×{n:g} a step" if n != 1 else "")

header = ("| kernel | time per launch | FP32 | of peak | DRAM | of peak | shared memory | of peak | "
          "SM busy | registers | occupancy (achieved; limit by registers, shared memory) | "
          "main stalls (cycles per issued instruction) |")
rule = "|---" * 12 + "|"
if tensor:
    header += f" tensor pipe (of its peak, active cycles) | mma.sync (HMMA) per launch | {operands} | of peak |"
    rule += "---|---|---|---|"
emit(header)
emit(rule)
kernel_us = mma_step = ops_step = 0.0
for key, rs in groups.items():
    t = median(rs, "gpu__time_duration.sum") * 1e-9  # ns
    flop = 2 * median(rs, "sm__sass_thread_inst_executed_op_ffma_pred_on.sum") + \
        median(rs, "sm__sass_thread_inst_executed_op_fadd_pred_on.sum") + \
        median(rs, "sm__sass_thread_inst_executed_op_fmul_pred_on.sum")
    dram = median(rs, "dram__bytes.sum")
    sms = median(rs, "device__attribute_multiprocessor_count")
    clock = median(rs, "sm__cycles_elapsed.avg.per_second")
    shared = median(rs, "l1tex__data_pipe_lsu_wavefronts_mem_shared.sum") * 128  # bytes per wavefront
    shared_peak = 128 * sms * clock
    stall = sorted(((v, s) for v, s in
                    ((median(rs, f"smsp__average_warps_issue_stalled_{s}_per_issue_active.ratio"), s)
                     for s in stalls) if not math.isnan(v)), reverse=True)[:3]
    kernel_us += t * 1e6 * per_step[key]
    row = (f"| {name(key)} | {t*1e6:.1f} µs | {show(flop/t/1e12, '.2f', ' TFLOP/s')} "
           f"| {show(100*flop/t/fp32_peak, '.0f', ' %')} "
           f"| {show(dram/t/1e9, '.0f', ' GB/s')} | {show(100*dram/t/dram_peak, '.1f', ' %')} "
           f"| {show(shared/t/1e12, '.2f', ' TB/s')} | {show(100*shared/t/shared_peak, '.0f', ' %')} "
           f"| {show(median(rs, 'sm__throughput.avg.pct_of_peak_sustained_elapsed'), '.0f', ' %')} "
           f"| {show(median(rs, 'launch__registers_per_thread'), '.0f')} "
           f"| {show(median(rs, 'sm__warps_active.avg.pct_of_peak_sustained_active'), '.0f', ' %')}; "
           f"{show(median(rs, 'launch__occupancy_limit_registers'), '.0f')}, "
           f"{show(median(rs, 'launch__occupancy_limit_shared_mem'), '.0f')} blocks/SM "
           f"| " + (", ".join(f"{s.replace('_', ' ')} {v:.1f}" for v, s in stall) or "n/a") + " |")
    if tensor:
        mma = median(rs, "sm__inst_executed_pipe_tensor_op_hmma.sum")
        ops = median(rs, ops_metric)
        mma_step += mma * per_step[key]  # NaN from here on when the metric is absent
        ops_step += ops * per_step[key]
        tensor_flop = 2048 * mma  # 2 x 16 x 8 x 8 FLOP per warp-level mma.sync.m16n8k8
        row += (f" {show(median(rs, 'sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active'), '.1f', ' %')} "
                f"| {show(mma, ',.0f')} | {show(tensor_flop/t/1e12, '.2f', ' TFLOP/s')} "
                f"| {show(100*tensor_flop/t/tensor_peak, '.1f', ' %')} |")
    emit(row)
# An epoch trains the training set's 60,000 images less those held out (--validation, held out
# first; a setup from before the field existed held out none or did not say), or the first
# --train-limit of the rest.
available = 60000 - int(setup.get("validation_images", 0))
images = min(int(setup["train_images"]) or available, available)
steps = -(-images // int(setup["batch_size"]))
epoch_ms = 1e3 * seed["median_epoch_s"]
kernels_ms = kernel_us * steps / 1e3
launches = round(sum(per_step.values()))
words = ["no", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"]
emit()
emit(f"The epoch (lenet5 bench, median of epochs 2-4): {epoch_ms:.1f} ms for {steps} steps of "
      f"{setup['batch_size']}, {1e3 * epoch_ms / steps:.1f} µs a step; the "
      f"{words[launches] if launches < len(words) else launches} kernels run one "
      f"after the other: {kernel_us:.1f} µs a step, {kernels_ms:.1f} ms an epoch.")
if kernels_ms <= epoch_ms:
    emit(f"The rest of the epoch, {epoch_ms - kernels_ms:.1f} ms "
          f"({100 * (epoch_ms - kernels_ms) / epoch_ms:.0f} %), is launch gaps and waits.")
elif not tensor:
    emit(f"The epoch is {100 * (1 - epoch_ms / kernels_ms):.0f} % shorter than the kernels run "
          f"one after the other: programmatic launch starts each kernel while the previous one "
          f"drains, so the gaps are hidden and the kernels themselves bound the step.")
else:
    emit(f"The epoch is {100 * (1 - epoch_ms / kernels_ms):.0f} % shorter than the kernels run "
          f"one after the other, which this set's launches do not explain (they are programmatic, "
          f"but none lets the next start before its own blocks have exited, so none overlaps the "
          f"next): ncu's times, each launch run alone, are longer than the same launches take in "
          f"the epoch's graph (docs/tensor-cores.md times them there).")
if tensor and not math.isnan(mma_step):
    step_flop = 2048 * mma_step
    emit(f"The tensor cores' work: {mma_step / 1e6:.3f} M mma.sync a step "
         f"({step_flop / 1e9:.2f} GFLOP of {operands} at 2,048 FLOP each), "
         f"{step_flop / (kernel_us * 1e-6) / 1e12:.2f} TFLOP/s over the kernels' time and "
         f"{step_flop / (epoch_ms * 1e-3 / steps) / 1e12:.2f} TFLOP/s over the epoch's "
         f"({100 * step_flop / (epoch_ms * 1e-3 / steps) / tensor_peak:.1f} % of the {operands} peak).")
    if not math.isnan(ops_step) and mma_step > 0:
        emit(f"ncu's own count, {ops_metric.removesuffix('.sum')}, is {ops_step / mma_step:,.0f} "
             f"per mma.sync (2,048 if it counts FLOP as this table does, 1,024 if it counts "
             f"multiply-adds).")

gpu = setup.get("gpu", setup.get("device", "?")).split(" (")[0]
commit = os.environ.get("ROOFLINE_COMMIT") or setup.get("commit", "?")
heading = (f"Measured on {measured_on} on the {gpu} at {commit} (`{command}`; "
           f"peaks {', '.join(peaks)}, 128 bytes of "
           f"shared memory per SM per cycle; written by the script):")
print("\n".join(report))
with open(block_path, "w") as block:
    block.write("\n".join([heading, ""] + report) + "\n")
EOF
[ -z "$results" ] || python3 "$root/scripts/results_block.py" "$results" "$marker" <"$block"
