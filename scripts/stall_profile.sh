#!/usr/bin/env bash
# Where a kernel's warps stall, by function and by source line: Nsight Compute's source counters
# (warp-stall sampling) over one launch of the whole-step sample kernel, summed per stall reason,
# per function of cuda/ (the definition that encloses each sampled line) and per line, as Markdown
# tables. docs/performance.md's "Where the warps stall" comes from the same measurement.
#
#   scripts/stall_profile.sh [--config configs/fast.toml] [--batch-size 64] [--precision fp32]
#                            [--kernel REGEX] [--skip N] [--top N] [--out DIR] [--binary PATH]
#                            [-- lenet5 bench options]
#   scripts/stall_profile.sh --from DIR [--top N] [--source-root DIR]
#
# --kernel picks the kernel by name (default whole_step_sample_kernel1, the one a lone model runs
# at batch 64 or 128 on an H200; larger grids run whole_step_sample_kernel2); --skip N profiles the
# launch after the first N of that kernel (default 200), with the caches and clocks left as they
# run. The tables go to standard output and to DIR/stalls.md (--out, default stalls/), the report
# to DIR/profile.ncu-rep and its source page to DIR/source.csv. --from DIR measures nothing: it
# makes the tables from DIR/source.csv, written by an earlier run. --source-root DIR is the tree
# the sampled files are read from to find their functions (default: this one).
#
# Each SASS instruction counts once. One inlined into another file's function is listed by ncu
# under each file of its inline chain; it counts on the innermost line of this tree.
# One launch of 64 blocks gives about 2,000 samples: shares of a few % are indicative only.
# Lines come out only from a binary built with line information. CMakeLists.txt compiles the
# kernels with -lineinfo, so this tree's build/lenet5 has it.
# Needs a GPU, ncu on PATH (it is in the CUDA toolkit's bin/), python3, and permission to read the
# GPU's counters.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
say() { echo "stall_profile: $*" >&2; }
absolute() { case "$1" in /*) echo "$1" ;; *) echo "$PWD/$1" ;; esac; }

config=$root/configs/fast.toml batch=64 precision=fp32 kernel=whole_step_sample_kernel1 skip=200
top=15 out=$root/stalls binary=$root/build/lenet5 from="" source_root=$root measuring=()
[ -n "${LENET5:-}" ] && binary=$(absolute "$LENET5")
number() { [[ "$2" =~ ^(0|[1-9][0-9]*)$ ]] || { say "$1 takes a whole number, not '$2'"; exit 2; }; }
while [ $# -gt 0 ]; do
  case "$1" in
    --config | --batch-size | --precision | --kernel | --skip | --out | --binary) measuring+=("$1") ;;
  esac
  case "$1" in
    -h | --help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    --) shift; measuring+=(--); break ;;
    --config | --batch-size | --precision | --kernel | --skip | --top | --out | --binary | --from | \
      --source-root) [ $# -ge 2 ] || { say "$1 needs a value (see --help)"; exit 2; } ;;
  esac
  case "$1" in
    --config) config=$(absolute "$2") ;;
    --batch-size) number "$1" "$2"; batch=$2 ;;
    --precision) precision=$2 ;;
    --kernel) kernel=$2 ;;
    --skip) number "$1" "$2"; skip=$2 ;;
    --top) number "$1" "$2"; top=$2 ;;
    --out) out=$(absolute "$2") ;;
    --binary) binary=$(absolute "$2") ;;
    --from) from=$(absolute "$2") ;;
    --source-root) source_root=$(absolute "$2") ;;
    *) say "unknown argument '$1' (see --help)"; exit 2 ;;
  esac
  shift 2
done
command -v python3 >/dev/null 2>&1 || { say "python3 is not on PATH (scripts/setup.sh installs it)"; exit 1; }

if [ -n "$from" ]; then
  [ ${#measuring[@]} -eq 0 ] ||
    { say "--from measures nothing: it takes only --top and --source-root, not ${measuring[0]}"; exit 2; }
  [ -f "$from/source.csv" ] ||
    { say "--from $from: no source.csv there (an earlier run's --out folder)"; exit 2; }
  out=$from
else
  command -v ncu >/dev/null 2>&1 ||
    { say "ncu (the Nsight Compute CLI) is not on PATH: add the CUDA toolkit's bin/ to PATH"; exit 1; }
  [ -x "$binary" ] || { say "no lenet5 binary at '$binary' (scripts/setup.sh, or --binary PATH)"; exit 1; }
  mkdir -p "$out"
  rm -f "$out/profile.ncu-rep" "$out/source.csv" "$out/stalls.md"
  say "profiling launch $((skip + 1)) of $kernel with ncu"
  ncu --section SourceCounters --section WarpStateStats --import-source yes \
      --cache-control none --clock-control none \
      --kernel-name "regex:$kernel" --launch-skip "$skip" --launch-count 1 -o "$out/profile" \
      "$binary" -q bench --config "$config" --batch-size "$batch" --precision "$precision" \
      --epochs 1 --evaluate false --augment none "$@" >"$out/ncu.log" 2>&1 ||
    { say "ncu failed (log: $out/ncu.log)"; tail -5 "$out/ncu.log" >&2; exit 1; }
  [ -f "$out/profile.ncu-rep" ] ||
    { say "ncu profiled no launch of '$kernel' (log: $out/ncu.log): check --kernel and --skip"; exit 1; }
  ncu -i "$out/profile.ncu-rep" --page source --csv --print-source cuda,sass >"$out/source.csv" ||
    { say "ncu could not export the source page of $out/profile.ncu-rep"; exit 1; }
fi

python3 - "$out/source.csv" "$source_root" "$top" "$out/stalls.md" <<'PY'
import collections, csv, os, re, sys
path, source_root, top, report_path = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
def fail(message, status):
    print(f"stall_profile: {message}", file=sys.stderr)
    sys.exit(status)

# The source page: a section per file (File Path, Function Name, a header row), then a row per
# source line (its number first), each followed by its SASS instructions (an address, no number)
# with their own counts. An instruction inlined from another file is listed once per file of its
# inline chain, sometimes under two lines of one file: its frames.
frames, metrics, text = collections.defaultdict(list), {}, {}
file = key = columns = None
def value(row, column):
    try: return float(row[column].replace(",", "")) if column is not None else 0.0
    except (ValueError, IndexError): return 0.0
for row in csv.reader(open(path, newline="")):
    if not row: continue
    if row[0] == "File Path":
        file, key = row[1], None
        continue
    if row[0] == "Line No":
        at = {name: i for i, name in reversed(list(enumerate(row)))}
        if "Warp Stall Sampling (All Samples)" not in at or "Address" not in at:
            fail(f"{path}: not the page that ncu --page source --csv --print-source cuda,sass "
                 "writes (no Address or Warp Stall Sampling column)", 2)
        columns = (at["Address"], at["Warp Stall Sampling (All Samples)"],
                   at.get("Instructions Executed"),
                   [(i, n[len("stall_"):]) for i, n in enumerate(row)
                    if n.startswith("stall_") and "Not Issued" not in n])
        continue
    if columns is None: continue
    address_column, samples_column, executed_column, stall_columns = columns
    if row[0].strip().isdigit():
        key = (file, int(row[0]))
        text[key] = row[1].strip()
        continue
    address = row[address_column] if address_column < len(row) else ""
    if key is None or not address.startswith("0x"): continue
    frames[address].append(key)
    metrics[address] = (value(row, samples_column), value(row, executed_column),
                        {reason: value(row, i) for i, reason in stall_columns})
if columns is None:
    fail(f"{path}: not the page that ncu --page source --csv --print-source cuda,sass writes "
         "(no Line No header)", 2)
if not frames:
    fail(f"{path} has no instructions under source lines: the binary had no line information "
         "(CMakeLists.txt compiles with -lineinfo): profile one of this tree's builds (--binary)", 1)

# A sampled file's copy in this tree: the longest tail of its path found under source_root.
located = {}
def local(file):
    if file not in located:
        parts, located[file] = file.replace("\\", "/").split("/"), (None, os.path.basename(file))
        for k in range(1, len(parts)):
            candidate = os.path.join(source_root, *parts[k:])
            if os.path.isfile(candidate):
                located[file] = (candidate, "/".join(parts[k:]))
                break
    return located[file]

# The function whose definition encloses a line: the last definition at or above it, a line that
# starts (after any indent) with __device__, __global__, __host__, LENET5_HD or LENET5_HOST_DEVICE.
# Its name may sit on the next line, after __launch_bounds__; an indented one is a member of the
# struct or class above it.
definition = re.compile(r"\s*(__device__|__global__|__host__|LENET5_HD|LENET5_HOST_DEVICE)\b")
skipped = ("__launch_bounds__", "__align__", "__device__", "__host__")
definitions = {}
def enclosing(file, line):
    local_path, shown = local(file)
    if local_path is None: return None, f"{shown} (outside the tree)"
    if local_path not in definitions:
        found, owner = [], None
        lines = open(local_path, errors="replace").read().split("\n")
        for number, source in enumerate(lines, 1):
            struct = re.match(r"(struct|class)\s+(\w+)", source)
            if struct: owner = struct.group(2)
            if not definition.match(source): continue
            for candidate in (source, lines[number] if number < len(lines) else ""):
                names = [n for n in re.findall(r"([A-Za-z_]\w*)\s*\(", candidate) if n not in skipped]
                if names:
                    name = "operator()" if names[0] == "operator" else names[0]
                    member = source[:1].isspace() and owner
                    found.append((number, names[0], f"{owner}::{name}" if member else name))
                    break
        definitions[local_path] = found
    name, shown_name = None, "(file scope)"
    for number, candidate, full in definitions[local_path]:
        if number > line: break
        name, shown_name = candidate, full
    return name, f"{shown_name} ({shown})"

# The line an instruction counts on: of its frames, those in this tree if any; of those, the ones
# that do not call the function enclosing another of its frames (a caller's side of the inline
# chain); of what is left, the first listed.
def counted_frame(keys):
    keys = list(dict.fromkeys(keys))
    inside = [k for k in keys if local(k[0])[0] is not None] or keys
    names = {k: enclosing(*k)[0] for k in inside}
    def calls(k, other):
        return other != k and names[other] and re.search(rf"\b{re.escape(names[other])}\s*[<(]", text[k])
    innermost = [k for k in inside if not any(calls(k, other) for other in inside)]
    return (innermost or inside)[0]

samples, reasons = collections.Counter(), collections.defaultdict(collections.Counter)
by_reason, instructions = collections.Counter(), 0.0
for address, keys in frames.items():
    sampled, executed, stalls = metrics[address]
    key = counted_frame(keys)
    samples[key] += sampled
    reasons[key].update(stalls)
    by_reason.update(stalls)
    instructions += executed
total = sum(samples.values())
if total == 0: fail(f"{path}: no warp-stall samples (did the profiled launch run?)", 1)

def share(v): return f"{100 * v / total:.1f} %"
def main_reasons(counter, n=3):
    return ", ".join(f"{r.replace('_', ' ')} {v:.0f}" for r, v in counter.most_common(n) if v > 0)
def ranked(counter, name):
    return sorted(((k, v) for k, v in counter.items() if v > 0), key=lambda kv: (-kv[1], name(kv[0])))
out = [f"{total:.0f} warp-stall samples over {len(frames)} SASS instructions; "
       f"{instructions / 1e6:.2f} M warp instructions executed.", ""]
out += ["| stall reason | samples | share |", "|---|---|---|"]
out += [f"| {r.replace('_', ' ')} | {v:.0f} | {share(v)} |" for r, v in ranked(by_reason, str)]
by_function, function_reasons = collections.Counter(), collections.defaultdict(collections.Counter)
for key, v in samples.items():
    function = enclosing(*key)[1]
    by_function[function] += v
    function_reasons[function].update(reasons[key])
out += ["", "| function | samples | share | main stall reasons |", "|---|---|---|---|"]
out += [f"| {f} | {v:.0f} | {share(v)} | {main_reasons(function_reasons[f])} |"
        for f, v in ranked(by_function, str)]
def where(key): return f"{local(key[0])[1]}:{key[1]}"
out += ["", f"| line (the {top} with the most samples) | samples | share | main stall reasons | source |",
        "|---|---|---|---|---|"]
for key, v in ranked(samples, where)[:top]:
    source = text[key][:80].replace("|", "\\|")
    out += [f"| {where(key)} | {v:.0f} | {share(v)} | {main_reasons(reasons[key])} | `{source}` |"]
report = "\n".join(out) + "\n"
open(report_path, "w").write(report)
sys.stdout.write(report)
PY
