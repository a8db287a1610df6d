#!/usr/bin/env bash
# Where a kernel's warps stall, by function and by source line: Nsight Compute's source counters
# (warp-stall sampling) over one launch of the whole-step sample kernel, summed per stall reason,
# per function of cuda/ (the definition that encloses each sampled line) and per line, as Markdown
# tables. perf-notes.md's "Where the warps stall" comes from the same measurement.
#
#   scripts/stall_profile.sh [--config configs/fast.toml] [--batch-size 64] [--precision fp32]
#                            [--kernel REGEX] [--skip N] [--top N] [--out DIR] [--binary PATH]
#                            [--from DIR] [-- lenet5 bench options]
#
# --kernel picks the kernel by name (default whole_step_sample_kernel1, the one a lone model runs
# at batch 64 or 128 on an H200; larger grids run whole_step_sample_kernel2); --skip N profiles the
# launch after the first N of that kernel (default 200: caches and clocks in steady state). The
# tables go to standard output and to DIR/stalls.md (--out, default stalls/), the report to
# DIR/profile.ncu-rep and its source page to DIR/source.csv. --from DIR measures nothing: it makes
# the tables from DIR/source.csv, written by an earlier run.
#
# One launch of 64 blocks gives about 2,000 samples: shares of a few % are indicative only.
# Lines come out only from a binary built with line information: configure a build folder with
# -DCMAKE_CUDA_FLAGS=-lineinfo (say build-lineinfo/) and pass --binary build-lineinfo/lenet5.
# Needs a GPU, ncu on PATH, python3, and permission to read the GPU's counters.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
say() { echo "stall_profile: $*" >&2; }
absolute() { case "$1" in /*) echo "$1" ;; *) echo "$PWD/$1" ;; esac; }

config=$root/configs/fast.toml batch=64 precision=fp32 kernel=whole_step_sample_kernel1 skip=200
top=15 out=$root/stalls binary=$root/build/lenet5 from="" source_root=$root
[ -n "${LENET5:-}" ] && binary=$(absolute "$LENET5")
number() { [[ "$2" =~ ^[0-9]+$ ]] || { say "$1 takes a whole number, not '$2'"; exit 2; }; }
while [ $# -gt 0 ]; do
  case "$1" in
    --config) config=$(absolute "$2"); shift 2 ;;
    --batch-size) number "$1" "$2"; batch=$2; shift 2 ;;
    --precision) precision=$2; shift 2 ;;
    --kernel) kernel=$2; shift 2 ;;
    --skip) number "$1" "$2"; skip=$2; shift 2 ;;
    --top) number "$1" "$2"; top=$2; shift 2 ;;
    --out) out=$(absolute "$2"); shift 2 ;;
    --binary) binary=$(absolute "$2"); shift 2 ;;
    --from) from=$(absolute "$2"); shift 2 ;;
    --source-root) source_root=$(absolute "$2"); shift 2 ;;  # where the sampled files are read
    --) shift; break ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) say "unknown argument '$1' (see --help)"; exit 2 ;;
  esac
done

if [ -n "$from" ]; then
  [ -f "$from/source.csv" ] ||
    { say "--from $from: no source.csv there (an earlier run's --out folder)"; exit 2; }
  out=$from
else
  command -v ncu >/dev/null 2>&1 || { say "ncu (the Nsight Compute CLI) is not on PATH"; exit 1; }
  [ -x "$binary" ] || { say "no lenet5 binary at '$binary' (scripts/setup.sh, or --binary PATH)"; exit 1; }
  mkdir -p "$out"
  say "profiling launch $((skip + 1)) of $kernel with ncu"
  ncu --section SourceCounters --section WarpStateStats --import-source yes -f \
      --kernel-name "regex:$kernel" --launch-skip "$skip" --launch-count 1 -o "$out/profile" \
      "$binary" -q bench --config "$config" --batch-size "$batch" --precision "$precision" \
      --epochs 1 --evaluate false --augment none "$@" >"$out/ncu.log" 2>&1 ||
    { say "ncu failed (log: $out/ncu.log)"; tail -5 "$out/ncu.log" >&2; exit 1; }
  [ -f "$out/profile.ncu-rep" ] ||
    { say "ncu profiled no launch of '$kernel' (log: $out/ncu.log): check --kernel and --skip"; exit 1; }
  ncu -i "$out/profile.ncu-rep" --page source --csv --print-source cuda,sass >"$out/source.csv"
fi

python3 - "$out/source.csv" "$source_root" "$top" "$out/stalls.md" <<'EOF'
import collections, csv, os, re, sys
path, source_root, top, report_path = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]

# The source page: a section per file (File Path, Function Name, a header row), then a row per
# source line (its number first) followed by that line's SASS rows (no number).
samples, reasons, text = collections.Counter(), collections.defaultdict(collections.Counter), {}
instructions = 0.0
file, header = None, None
def value(row, column):
    try: return float(row[column].replace(",", "")) if column is not None else 0.0
    except (ValueError, IndexError): return 0.0
for row in csv.reader(open(path, newline="")):
    if not row: continue
    if row[0] == "File Path": file = row[1]; continue
    if row[0] == "Line No":
        header = row
        at = {name: i for i, name in reversed(list(enumerate(row)))}
        all_samples = at.get("Warp Stall Sampling (All Samples)")
        executed = at.get("Instructions Executed")
        stall_columns = [(i, name[len("stall_"):]) for i, name in enumerate(row)
                         if name.startswith("stall_") and "Not Issued" not in name]
        continue
    if header is None or not row[0].strip().isdigit(): continue
    key = (file, int(row[0]))
    samples[key] += value(row, all_samples)
    instructions += value(row, executed)
    text[key] = row[1].strip()
    for i, reason in stall_columns: reasons[key][reason] += value(row, i)
total = sum(samples.values())
if not samples or total == 0:
    print(f"stall_profile: {path} has no sampled source lines: build lenet5 with "
          "-DCMAKE_CUDA_FLAGS=-lineinfo and profile that binary (--binary)", file=sys.stderr)
    sys.exit(2)

# A sampled file's copy in this tree: the longest tail of its path found under source_root.
def local(file):
    parts = file.replace("\\", "/").split("/")
    for k in range(1, len(parts)):
        candidate = os.path.join(source_root, *parts[k:])
        if os.path.isfile(candidate): return candidate, "/".join(parts[k:])
    return None, os.path.basename(file)

# The function whose definition encloses a line: the last top-level __device__ / __global__
# definition at or above it (its name may sit on the next line, after __launch_bounds__).
definitions = {}
def enclosing(file, line):
    local_path, shown = local(file)
    if local_path is None: return f"{shown} (outside the tree)"
    if local_path not in definitions:
        found, lines = [], open(local_path, errors="replace").read().split("\n")
        for number, source in enumerate(lines, 1):
            if not re.match(r"(__device__|__global__)\b", source): continue
            for candidate in (source, lines[number] if number < len(lines) else ""):
                names = [n for n in re.findall(r"([A-Za-z_]\w*)\s*\(", candidate)
                         if n not in ("__launch_bounds__", "__align__")]
                if names: found.append((number, names[0])); break
        definitions[local_path] = found
    name = None
    for number, candidate in definitions[local_path]:
        if number > line: break
        name = candidate
    return f"{name or '(file scope)'} ({shown})"

def share(v): return f"{100 * v / total:.1f} %"
def main_reasons(counter, n=3):
    return ", ".join(f"{r.replace('_', ' ')} {v:.0f}" for r, v in counter.most_common(n) if v > 0)
out = [f"{total:.0f} warp-stall samples; {instructions / 1e6:.2f} M warp instructions executed.", ""]
by_reason = collections.Counter()
for counter in reasons.values(): by_reason.update(counter)
out += ["| stall reason | samples | share |", "|---|---|---|"]
out += [f"| {r.replace('_', ' ')} | {v:.0f} | {share(v)} |" for r, v in by_reason.most_common() if v > 0]
by_function, function_reasons = collections.Counter(), collections.defaultdict(collections.Counter)
for key, v in samples.items():
    function = enclosing(*key)
    by_function[function] += v
    function_reasons[function].update(reasons[key])
out += ["", "| function | samples | share | main stall reasons |", "|---|---|---|---|"]
out += [f"| {f} | {v:.0f} | {share(v)} | {main_reasons(function_reasons[f])} |"
        for f, v in by_function.most_common() if v > 0]
out += ["", f"| line (the {top} with the most samples) | samples | share | main stall reasons | source |",
        "|---|---|---|---|---|"]
for key, v in samples.most_common(top):
    if v <= 0: break
    source = text[key][:80].replace("|", "\\|")
    out += [f"| {local(key[0])[1]}:{key[1]} | {v:.0f} | {share(v)} | {main_reasons(reasons[key])} | `{source}` |"]
report = "\n".join(out) + "\n"
open(report_path, "w").write(report)
sys.stdout.write(report)
EOF
