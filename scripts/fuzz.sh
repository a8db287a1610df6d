#!/usr/bin/env bash
# Builds the fuzz targets (tests/fuzz/: every reader of outside data) with clang's libFuzzer,
# AddressSanitizer and UndefinedBehaviorSanitizer, and runs each for SECONDS (default 60) on a
# working copy of its committed seed corpus. An input counts as a crash when a sanitizer reports,
# an exception other than lenet5's own refusals escapes, one allocation reaches 1 GiB, the
# process's memory 2 GiB, or one input takes more than 60 s. Crashing inputs are kept under
# build-fuzz/artifacts/<target>/, where a reused build keeps those of earlier runs too (and counts
# them again) until they are removed; the script exits 1 if there is any, or if a target did not
# finish.
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
#   scripts/fuzz.sh --summary [TARGET...]      the last run's table and crashes, running nothing
#
# The output ends with a table (runs, runs a second, corpus size and crashes per target) and, for
# each crash, its input as one line of base64, the command that replays it and the first lines
# of its report: a CI machine keeps no files, and its log's end is then enough.
#
# Environment: FUZZ_BUILD (build folder, default build-fuzz; an existing fuzz build keeps its own
# settings), FUZZ_JOBS (targets run at once, default the number of cores), FUZZ_SHARE_CORES (every
# target at once, each for SECONDS of a core; see where it is read), FUZZ_SEED (libFuzzer's -seed;
# default a new seed each run). The same seed does not repeat a run: two runs of one build from the
# same corpus and seed took different inputs after 163 (docs/reliability.md).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
build=${FUZZ_BUILD:-build-fuzz}
jobs=${FUZZ_JOBS:-$(nproc)}
# What counts as a crash besides a sanitizer's report or an escaping exception (see above).
limits="-rss_limit_mb=2048 -malloc_limit_mb=1024 -timeout=60"

built_targets() {
  sed -n 's/^LENET5_FUZZ_BUILT_TARGETS:INTERNAL=//p' "$build/CMakeCache.txt" | tr ';' ' '
}

# Configures and builds the fuzz build, and sets `targets` to every target when none was named.
configure_and_build() {
  if ! command -v clang++ >/dev/null; then
    echo "fuzz.sh: clang++ not found: install clang (scripts/setup.sh --fuzz does)" >&2
    exit 2
  fi
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang \
    -DCMAKE_CXX_COMPILER=clang++ -DLENET5_WITH_CUDA=OFF -DLENET5_FUZZ=ON \
    ${CMAKE_CXX_COMPILER_LAUNCHER:+-DCMAKE_CXX_COMPILER_LAUNCHER=$CMAKE_CXX_COMPILER_LAUNCHER} \
    >"$build.configure.log" 2>&1 || { tail -20 "$build.configure.log"; exit 1; }
  [ ${#targets[@]} -gt 0 ] || targets=($(built_targets))
  cmake --build "$build" --target $(printf 'fuzz_%s ' "${targets[@]}")
}

# One target: its corpus grows in a working copy; the committed seeds stay as they are.
fuzz_one() {
  local name=$1 work=$build/corpus/$1 artifacts=$build/artifacts/$1
  mkdir -p "$work" "$artifacts"
  # Its seeds, and every input that fuzzing has found before (tests/data/fuzz-found/), whichever
  # reader it troubled: a regression of one is caught by every target that can reach it.
  cp -n tests/fuzz/corpus/"$name"/* tests/data/fuzz-found/* "$work"/ 2>/dev/null || true
  # A target's dictionary (tests/fuzz/<name>.dict), where it has one: the words of its format.
  local dict=tests/fuzz/$name.dict
  ASAN_OPTIONS=detect_leaks=1 \
    "$build/tests/fuzz/fuzz_$name" -max_total_time="$seconds" ${FUZZ_SEED:+-seed=$FUZZ_SEED} \
    $limits -report_slow_units=60 -print_final_stats=1 -artifact_prefix="$artifacts/" \
    $([ -f "$dict" ] && echo "-dict=$dict") "$work" >"$build/fuzz_$name.log" 2>&1
}

# A crash's input (libFuzzer's are at most 4 KiB here; the corpus seeds, at most 2.5 KiB) as one
# line of base64, the command that replays it (with the bounds that made it a crash) and the first
# lines of its report.
report_crashes() {
  local name=$1 log=$build/fuzz_$1.log artifact
  for artifact in "$build/artifacts/$name"/*; do
    [ -f "$artifact" ] || continue
    echo "$name: $(basename "$artifact") ($(stat -c %s "$artifact") bytes) as base64:" >&2
    base64 -w 0 "$artifact" >&2
    echo >&2
    echo "  to replay: echo <that line> | base64 -d > crash.bin &&" \
      "ASAN_OPTIONS=detect_leaks=1 $build/tests/fuzz/fuzz_$name $limits crash.bin" >&2
  done
  # libFuzzer's and the sanitizers' reports start with "==PID==ERROR", "ERROR: libFuzzer" or
  # UBSan's "runtime error:"; the first 25 lines name the fault and the top of its stack.
  grep -s -m1 -A24 -E '^==[0-9]+==ERROR|ERROR: libFuzzer|runtime error:' "$log" |
    sed 's/^/  /' >&2 || true
}

# The table of every target's run, then each crash; returns 1 if a target crashed or left no
# final statistics (it did not finish).
summarise() {
  local name log runs speed crashes failed=()
  printf '%-14s %10s %10s %8s %s\n' target runs exec/s corpus crashes
  for name in "${targets[@]}"; do
    log=$build/fuzz_$name.log
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" 2>/dev/null | tail -1 || true)
    speed=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" 2>/dev/null | tail -1 || true)
    crashes=$(find "$build/artifacts/$name" -type f 2>/dev/null | wc -l || true)
    printf '%-14s %10s %10s %8s %s\n' "$name" "${runs:-?}" "${speed:-?}" \
      "$(find "$build/corpus/$name" -type f 2>/dev/null | wc -l)" "$crashes"
    if [ "$crashes" -gt 0 ] || [ -z "$runs" ]; then
      echo "  $name: see $log and $build/artifacts/$name/" >&2
      failed+=("$name")
    fi
  done
  for name in "${failed[@]}"; do report_crashes "$name"; done
  [ ${#failed[@]} -eq 0 ]
}

if [ "${1:-}" = --summary ]; then
  shift
  targets=("$@")
  if [ ! -f "$build/CMakeCache.txt" ]; then
    echo "fuzz.sh --summary: no fuzz build in '$build' (set FUZZ_BUILD to the one that ran)" >&2
    exit 2
  fi
  [ ${#targets[@]} -gt 0 ] || targets=($(built_targets))
  if [ ${#targets[@]} -eq 0 ]; then
    echo "fuzz.sh --summary: '$build' is not a fuzz build (configured with -DLENET5_FUZZ=ON)" >&2
    exit 2
  fi
  summarise || exit 1
  exit 0
fi

seconds=${1:-60}
shift || true
targets=("$@")
configure_and_build
# FUZZ_SHARE_CORES=1: every target at once, for as long as gives each SECONDS of a core (five
# targets on two cores: 150 s), instead of FUZZ_JOBS at a time for SECONDS each, where a core
# idles while the last of an odd number of targets runs alone.
if [ -n "${FUZZ_SHARE_CORES:-}" ]; then
  cores=$(nproc)
  jobs=${#targets[@]}
  seconds=$((seconds * jobs / (cores < jobs ? cores : jobs)))
  echo "fuzz.sh: the ${jobs} targets at once on ${cores} cores, for ${seconds} s"
fi
export -f fuzz_one
export build seconds limits
status=0
printf '%s\n' "${targets[@]}" | xargs -P "$jobs" -I{} bash -c 'fuzz_one {}' || status=1
summarise || status=1
exit $status
