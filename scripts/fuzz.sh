#!/usr/bin/env bash
# Builds the fuzz targets (tests/fuzz/: every reader of outside data) with clang's libFuzzer,
# AddressSanitizer and UndefinedBehaviorSanitizer, and runs each for SECONDS (default 60) on a
# working copy of its committed seed corpus. An input counts as a crash when a sanitizer reports,
# an exception other than lenet5's own refusals escapes, one allocation reaches 1 GiB, the
# process's memory 2 GiB, or one input takes more than 60 s. Crashing inputs are kept under
# build-fuzz/artifacts/<target>/; the script exits 1 if there is any.
#
# The bounds lenet5 promises for any input, 1 GiB and 20 s, are for the optimised program, and
# tests/cpu/test_bounded_inputs.cpp measures them on it with each format's costliest input. A
# fuzz target runs slower and holds more: ASan, UBSan and libFuzzer's comparison tracing at -O1,
# ASan's quarantine of freed memory (256 MB) and the corpus in the same process. The slowest
# accepted image (8192x4096 HDR, which stb expands to float RGB) takes 1.0 s and 520 MB optimised
# (the largest in memory, a 16-bit RGBA PNG, 552 MB), and 10 s and 840 MB in fuzz_image. The
# bounds here stay 6x and 2x above that, so they still catch a runaway loop or allocation without
# failing on the instrumentation; libFuzzer's report of slow inputs (10 s by default, an artifact
# like a crash's) waits as long.
#
#   scripts/fuzz.sh [SECONDS] [TARGET...]      e.g. scripts/fuzz.sh 600, scripts/fuzz.sh 30 idx
#
# Environment: FUZZ_BUILD (build folder, default build-fuzz; an existing fuzz build keeps its own
# settings), FUZZ_JOBS (targets run at once, default the number of cores), FUZZ_SEED (libFuzzer's
# -seed: the same seed, build and corpus mutate the same inputs in the same order, so a run is
# repeatable up to where its time ends; default a new seed each run).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
seconds=${1:-60}
shift || true
build=${FUZZ_BUILD:-build-fuzz}
jobs=${FUZZ_JOBS:-$(nproc)}
if ! command -v clang++ >/dev/null; then
  echo "fuzz.sh: clang++ not found: install clang (scripts/setup.sh --fuzz does)" >&2
  exit 2
fi
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang \
  -DCMAKE_CXX_COMPILER=clang++ -DLENET5_WITH_CUDA=OFF -DLENET5_FUZZ=ON \
  ${CMAKE_CXX_COMPILER_LAUNCHER:+-DCMAKE_CXX_COMPILER_LAUNCHER=$CMAKE_CXX_COMPILER_LAUNCHER} \
  >"$build.configure.log" 2>&1 || { tail -20 "$build.configure.log"; exit 1; }
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=($(sed -n 's/^LENET5_FUZZ_BUILT_TARGETS:INTERNAL=//p' "$build/CMakeCache.txt" | tr ';' ' '))
cmake --build "$build" --target $(printf 'fuzz_%s ' "${targets[@]}")

# One target: its corpus grows in a working copy; the committed seeds stay as they are.
fuzz_one() {
  local name=$1 work=$build/corpus/$1 artifacts=$build/artifacts/$1
  mkdir -p "$work" "$artifacts"
  # Its seeds, and every input that fuzzing has found before (tests/data/fuzz-found/), whichever
  # reader it troubled: a regression of one is caught by every target that can reach it.
  cp -n tests/fuzz/corpus/"$name"/* tests/data/fuzz-found/* "$work"/ 2>/dev/null || true
  ASAN_OPTIONS=detect_leaks=1 \
    "$build/tests/fuzz/fuzz_$name" -max_total_time="$seconds" ${FUZZ_SEED:+-seed=$FUZZ_SEED} \
    -rss_limit_mb=2048 -timeout=60 -report_slow_units=60 \
    -malloc_limit_mb=1024 -print_final_stats=1 -artifact_prefix="$artifacts/" "$work" \
    >"$build/fuzz_$name.log" 2>&1
}
export -f fuzz_one
export build seconds
status=0
printf '%s\n' "${targets[@]}" | xargs -P "$jobs" -I{} bash -c 'fuzz_one {}' || status=1
printf '%-14s %10s %10s %8s %s\n' target runs exec/s corpus crashes
for name in "${targets[@]}"; do
  log=$build/fuzz_$name.log
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  speed=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  crashes=$(find "$build/artifacts/$name" -type f | wc -l)
  printf '%-14s %10s %10s %8s %s\n' "$name" "${runs:-?}" "${speed:-?}" \
    "$(find "$build/corpus/$name" -type f | wc -l)" "$crashes"
  if [ "$crashes" -gt 0 ] || ! grep -q "^stat::number_of_executed_units" "$log"; then
    status=1
    echo "  $name: see $log and $build/artifacts/$name/" >&2
  fi
done
exit $status
