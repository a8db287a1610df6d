#!/usr/bin/env bash
# Prepares a fresh machine for lenet5: installs the Debian/Ubuntu packages it needs (idempotent),
# configures and builds into build/ (with GPU support when the CUDA toolkit's nvcc is there, the
# CPU-only program otherwise), and fetches MNIST into data/mnist.
#
#   scripts/setup.sh            everything
#   scripts/setup.sh --no-data  skip fetching MNIST (and Fashion-MNIST)
#   scripts/setup.sh --fashion  also install Debian's dataset-fashion-mnist and put Fashion-MNIST
#                               into data/fashion-mnist (for --dataset fashion-mnist)
#   scripts/setup.sh --handwriting  also install the handwriting fonts and Python imaging that
#                               scripts/make_handwriting_set.py needs (not needed to build or test)
#   scripts/setup.sh --fuzz     also install clang and its OpenMP runtime, which scripts/fuzz.sh
#                               builds the fuzz targets with (libFuzzer comes with clang)
#   scripts/setup.sh --slurm    also install Slurm and munge, for the test that runs a sweep as a
#                               job array on a real one-node Slurm (tests/slurm/)
#   scripts/setup.sh --help
#
# Environment: BUILD_DIR (default build), CMAKE_ARGS (extra cmake arguments, for example
# -DCMAKE_CUDA_ARCHITECTURES=80), LENET5_MNIST_MIRROR (a local folder holding the MNIST files).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
say() { echo "setup: $*" >&2; }

fetch_data=1
fashion=0
handwriting=0
fuzz=0
slurm=0
for arg in "$@"; do
  case "$arg" in
    --no-data) fetch_data=0 ;;
    --fashion) fashion=1 ;;
    --handwriting) handwriting=1 ;;
    --fuzz) fuzz=1 ;;
    --slurm) slurm=1 ;;
    -h|--help) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) say "unknown argument '$arg' (see --help)"; exit 2 ;;
  esac
done

# libopenblas-dev: the BLAS (SGEMM) of the fast CPU layers, src/layers/blas_cpu.cpp, in its
# pthreads build (CMakeLists.txt says why).
# libboost-dev: Boost.Beast and Boost.Asio (headers only), the HTTP server of `lenet5 serve`
# (src/serve/http_server.hpp).
packages=(build-essential cmake ninja-build pkg-config libcli11-dev libspdlog-dev libstb-dev
          zlib1g-dev nlohmann-json3-dev libgtest-dev
          libopenblas-dev libboost-dev)
if [ "$handwriting" -eq 1 ]; then
  # Digits in handwriting fonts for scripts/make_handwriting_set.py: fontconfig's fc-list finds
  # the fonts, Pillow draws them, NumPy does the photo-like lighting and noise.
  packages+=(fontconfig python3-pil python3-numpy fonts-bwht fonts-dkg-handwriting fonts-breip
             fonts-femkeklaver fonts-rufscript fonts-klee)
fi
if [ "$fashion" -eq 1 ]; then
  # Zalando's Fashion-MNIST as four IDX .gz files under /usr/share/datasets/fashion-mnist/, where
  # scripts/fetch_mnist.sh --dataset fashion-mnist finds them.
  packages+=(dataset-fashion-mnist)
fi
if [ "$fuzz" -eq 1 ]; then
  packages+=(clang libomp-dev)
fi
if [ "$slurm" -eq 1 ]; then
  packages+=(slurm-wlm munge)
fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  say "installing ${missing[*]}"
  $sudo apt-get install -y -q "${missing[@]}" >/dev/null 2>&1 ||
    { $sudo apt-get update -q >/dev/null && $sudo apt-get install -y -q "${missing[@]}" >/dev/null; } ||
    { say "could not install ${missing[*]}: install them with apt-get and run again"; exit 1; }
fi

# The page's test in a real browser (tests/browser/): chromium, node and npm, then puppeteer-core
# from npm (below). A node and npm that are already there are used as they are (NodeSource's
# nodejs package brings its own npm, which Debian's npm package conflicts with). What cannot be
# installed leaves only that test out: it reports itself skipped, with the reason.
browser=()
command -v chromium >/dev/null 2>&1 || browser+=(chromium)
command -v node >/dev/null 2>&1 || browser+=(nodejs)
command -v npm >/dev/null 2>&1 || browser+=(npm)
if [ ${#browser[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  say "installing ${browser[*]} (for the page's browser test)"
  $sudo apt-get install -y -q "${browser[@]}" >/dev/null 2>&1 ||
    { $sudo apt-get update -q >/dev/null 2>&1 && $sudo apt-get install -y -q "${browser[@]}" >/dev/null 2>&1; } ||
    say "could not install ${browser[*]}: the serve.page test will report itself skipped"
fi

if ! command -v nvcc >/dev/null 2>&1; then
  for dir in /usr/local/cuda/bin /usr/local/cuda-*/bin; do
    [ -x "$dir/nvcc" ] && export PATH="$dir:$PATH" && break
  done
fi
# Without nvcc, the CPU-only program is built: CMake finds no CUDA compiler, leaves GPU support out
# and says so in one line, with how to get it (CMakeLists.txt, LENET5_WITH_CUDA).

build_dir=${BUILD_DIR:-build}
generator=()
command -v ninja >/dev/null 2>&1 && generator=(-G Ninja)
if [ ! -f "$build_dir/CMakeCache.txt" ]; then
  # shellcheck disable=SC2086
  cmake -S . -B "$build_dir" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release ${CMAKE_ARGS:-} >&2
else
  # Configured again, with its own settings: a folder built without GPU support gets it once nvcc
  # is there (CMakeLists.txt looks for a CUDA compiler again each time it found none).
  cmake -S . -B "$build_dir" >&2
fi
cmake --build "$build_dir" -j "$(nproc)" >&2
say "built $build_dir/lenet5"

# puppeteer-core drives the installed chromium in the serve.page test and downloads no browser;
# it goes into the build folder, never into the repository. Without it the test says "skipped".
if [ ! -d "$build_dir/web-test/node_modules/puppeteer-core" ] && command -v npm >/dev/null 2>&1; then
  mkdir -p "$build_dir/web-test"
  npm install --prefix "$build_dir/web-test" --no-audit --no-fund puppeteer-core >&2 ||
    say "could not install puppeteer-core with npm: the serve.page test will be skipped"
fi

if [ "$fetch_data" -eq 1 ]; then
  scripts/fetch_mnist.sh
  if [ "$fashion" -eq 1 ]; then
    scripts/fetch_mnist.sh --dataset fashion-mnist
  fi
fi
