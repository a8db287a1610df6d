#!/usr/bin/env bash
# Measures Exercise 2's layout kernels (cuda/figures/conv_layouts.cuh) with Nsight Compute: runs
# `lenet5 figures ex2` under ncu, profiles one launch of each (layer, layout, kernel), and prints
# the DRAM bytes and the measured global-memory sectors per request next to the target's exact
# analytic model (and the least DRAM traffic, each byte once).
#
#   scripts/ncu_layouts.sh [--out DIR] [--ex5] [--binary PATH]
#
#   --out DIR      folder for the figures, ncu's report and CSV, and the joined table
#                  (default ncu-layouts/ in the project root, which git ignores)
#   --ex5          also measure Exercise 5's unroll kernel (cuda::conv_unroll, Fig 16.18) on ex5's
#                  cases (C1, C3, cuDNN L1 at N = 1), next to ex5's analytic sector counts
#   --binary PATH  the lenet5 binary (default: $LENET5, else build/lenet5 in the project root)
#
# How rows are named: the ex2 target runs the first launch of each kernel inside the NVTX push/pop
# ranges "ex2" > "ex2 <layer> <layout> <kernel>" (and "ex5" > "ex5 <case> unroll"); ncu --nvtx
# --nvtx-include "ex2/" profiles exactly those launches, and --print-nvtx-rename kernel reports
# each under its range's name. The kernel filter (--kernel-name) keeps it to the layout kernels
# (conv_forward_layout_kernel<...::NHWC> and so on, whose names carry the layout tag) and, with
# --ex5, conv_unroll_kernel3.
#
# Metrics: dram__bytes_read.sum, dram__bytes_write.sum, and
# l1tex__t_{sectors,requests}_pipe_lsu_mem_global_op_{ld,st}.sum (sectors per request = their
# ratio). ncu flushes the caches before each profiled launch (its default --cache-control all), so
# DRAM reads are the kernel's own; writes may stay in the 50 MB L2 and show as less than the output.
# Needs a GPU, ncu (Nsight Compute CLI) on PATH, python3, and permission to read the GPU's counters
# (root, or the driver's NVreg_RestrictProfilingToAdminUsers=0).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
say() { echo "ncu_layouts: $*" >&2; }
absolute() { case "$1" in /*) echo "$1" ;; *) echo "$PWD/$1" ;; esac; }  # from the caller's folder

out=$root/ncu-layouts ex5=0 binary=$root/build/lenet5
[ -n "${LENET5:-}" ] && binary=$(absolute "$LENET5")
while [ $# -gt 0 ]; do
  case "$1" in
    --out) [ $# -ge 2 ] || { say "--out needs a folder"; exit 2; }; out=$(absolute "$2"); shift 2 ;;
    --ex5) ex5=1; shift ;;
    --binary) [ $# -ge 2 ] || { say "--binary needs a path"; exit 2; }; binary=$(absolute "$2"); shift 2 ;;
    -h|--help) sed -n '2,27p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) say "unknown argument '$1' (see --help)"; exit 2 ;;
  esac
done

command -v ncu >/dev/null 2>&1 || {
  say "ncu (the Nsight Compute CLI) is not on PATH: it comes with the CUDA toolkit"
  say "(look in /usr/local/cuda/bin, or install Nsight Compute), then run again"
  exit 1
}
command -v python3 >/dev/null 2>&1 || { say "python3 is needed to read ncu's CSV"; exit 1; }
[ -x "$binary" ] || {
  say "no lenet5 binary at '$binary': build it (scripts/setup.sh) or pass --binary PATH"
  exit 1
}

mkdir -p "$out"
metrics=dram__bytes_read.sum,dram__bytes_write.sum
for op in ld st; do
  metrics+=,l1tex__t_sectors_pipe_lsu_mem_global_op_$op.sum
  metrics+=,l1tex__t_requests_pipe_lsu_mem_global_op_$op.sum
done
kernels='regex:conv_(forward|unroll)_layout_kernel'
ranges=(--nvtx-include 'ex2/')
if [ "$ex5" -eq 1 ]; then
  kernels='regex:conv_(forward|unroll)_layout_kernel|conv_unroll_kernel3'
  ranges+=(--nvtx-include 'ex5/')
fi

say "profiling '$binary figures ex2' (log: $out/figures_ex2.log)"
status=0
ncu --nvtx "${ranges[@]}" --kernel-name "$kernels" --metrics "$metrics" \
  --export "$out/layouts" --force-overwrite \
  "$binary" figures ex2 --device gpu --out "$out" >"$out/figures_ex2.log" 2>&1 || status=$?
grep -E '^(PASS|FAIL|SKIPPED) ex2' "$out/figures_ex2.log" >&2 || true
[ -f "$out/layouts.ncu-rep" ] || {
  say "ncu wrote no report (exit $status): see $out/figures_ex2.log"
  exit 1
}
ncu --import "$out/layouts.ncu-rep" --csv --page raw --print-units base \
  --print-nvtx-rename kernel >"$out/ncu_raw.csv"

python3 - "$out" "$ex5" <<'PY' || status=$?
import csv, io, os, re, sys

out, ex5 = sys.argv[1], sys.argv[2] == "1"
M = {"read": "dram__bytes_read.sum", "write": "dram__bytes_write.sum",
     "ld_sec": "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",
     "ld_req": "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum",
     "st_sec": "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum",
     "st_req": "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum"}

def number(text):
    text = (text or "").replace(",", "").strip()
    try:
        return float(text)
    except ValueError:
        return float("nan")

# ncu's raw page: a header row (with "Kernel Name"), a row of units, then one row per launch.
lines = open(os.path.join(out, "ncu_raw.csv")).read().splitlines()
start = next((i for i, l in enumerate(lines) if '"Kernel Name"' in l), None)
if start is None:
    sys.exit("ncu_layouts: no profiled kernels in ncu's CSV (see ncu_raw.csv and figures_ex2.log)")

def range_of(row):
    # --print-nvtx-rename kernel makes the name "<innermost range>/<demangled kernel>"; the raw
    # page also has the push/pop stack ('"<default domain>:ex2:..."  "<default domain>:ex2 C1 ...:..."').
    name = (row.get("Kernel Name") or "").strip()
    head = name.split("/", 1)[0]
    if head.startswith(("ex2 ", "ex5 ")):
        return head
    stack = next((v for k, v in row.items() if k and "Push/Pop_Range" in k), "") or ""
    found = re.findall(r'<default domain>:([^:"]*):', stack)
    return found[-1] if found else name

measured = {}
for row in csv.DictReader(io.StringIO("\n".join(lines[start:]))):
    if not (row.get("ID") or "").strip():
        continue  # the units row
    measured[range_of(row)] = {k: number(row.get(v)) for k, v in M.items()}

def ratio(a, b):
    return a / b if b else float("nan")

def read_csv(name):
    with open(os.path.join(out, "ex2", name)) as f:
        return list(csv.DictReader(f))

def fmt(v, digits=2):
    return "n/a" if v != v else f"{v:.{digits}f}"

def fmt_int(v):
    return "n/a" if v != v else f"{int(v):,}"

rows, missing, agree, compared = [], [], 0, 0
for a in read_csv("analytic.csv"):
    m = measured.get(a["range"])
    if m is None:
        missing.append(a["range"])
        m = {k: float("nan") for k in M}
    else:
        compared += 1
        agree += (fmt(ratio(m["ld_sec"], m["ld_req"])) == fmt(float(a["load_sectors_per_request"])) and
                  fmt(ratio(m["st_sec"], m["st_req"])) == fmt(float(a["store_sectors_per_request"])))
    rows.append([a["kernel"], a["layout"], a["layer"], fmt_int(m["read"]), fmt_int(m["write"]),
                 f'{int(a["least_dram_read_bytes"]):,}', f'{int(a["least_dram_write_bytes"]):,}',
                 fmt(ratio(m["ld_sec"], m["ld_req"])), fmt(float(a["load_sectors_per_request"])),
                 fmt(ratio(m["st_sec"], m["st_req"])), fmt(float(a["store_sectors_per_request"])),
                 fmt_int(m["ld_req"]), fmt_int(m["st_req"])])
columns = ["kernel", "layout", "layer", "DRAM read (B)", "DRAM write (B)", "least read (B)",
           "least write (B)", "load sectors/req", "model", "store sectors/req", "model",
           "load requests", "store requests"]
tables = [("ncu_layouts", columns, rows)]
if ex5:
    ex5_rows = []
    for a in read_csv("ex5_kernel.csv"):
        m = measured.get(a["range"])
        if m is None:
            missing.append(a["range"])
            m = {k: float("nan") for k in M}
        ex5_rows.append([a["case"], fmt(ratio(m["ld_sec"], m["ld_req"])), fmt(float(a["ex5 X reads"])),
                         fmt(ratio(m["st_sec"], m["st_req"])),
                         fmt(float(a["ex5 writes (Fig 16.14)"])), fmt_int(m["read"]), fmt_int(m["write"])])
    tables.append(("ncu_ex5", ["case", "load sectors/req", "ex5", "store sectors/req", "ex5",
                               "DRAM read (B)", "DRAM write (B)"], ex5_rows))

for name, cols, body in tables:
    widths = [max(len(c), *(len(r[i]) for r in body)) for i, c in enumerate(cols)]
    print("  ".join(c.rjust(w) for c, w in zip(cols, widths)))
    for r in body:
        print("  ".join(v.rjust(w) for v, w in zip(r, widths)))
    print()
    with open(os.path.join(out, name + ".csv"), "w", newline="") as f:
        csv.writer(f).writerows([cols] + body)
    with open(os.path.join(out, name + ".md"), "w") as f:
        f.write("| " + " | ".join(cols) + " |\n|" + "---|" * len(cols) + "\n")
        f.writelines("| " + " | ".join(r) + " |\n" for r in body)
print(f"measured load and store sectors/request equal the model's (to 2 decimals) on {agree} of "
      f"{compared} profiled ex2 kernels")
print(f"tables: {out}/ncu_layouts.csv" + (f", {out}/ncu_ex5.csv" if ex5 else "") +
      f"; ncu's own: {out}/ncu_raw.csv, {out}/layouts.ncu-rep")
if missing:
    sys.exit("ncu_layouts: not profiled: " + ", ".join(missing) + " (see ncu_raw.csv)")
PY
exit "$status"
