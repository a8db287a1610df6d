#!/usr/bin/env bash
# `cmake --install` as a user runs it (ctest install.prefix, label cpu): installs the build into a
# fresh prefix, then runs the installed program from a folder that is neither the source nor the
# build tree: --help, --version (which names the commit), a shipped config found by its bare name
# (a file of that name in the working folder first; a missing one refused with the list of
# shipped ones), a short training whose run folder shows the config's settings took effect, and
# the installed fetcher filling a fresh folder's data/mnist, where the installed program finds it.
# Exit 77 (ctest: skipped) after the checks that need no data when MNIST is not in MNIST_DIR.
#   install.sh CMAKE BUILD_DIR WORK_DIR MNIST_DIR
set -euo pipefail
cmake=$1 build=$2 work=$3 mnist=$4
fail() { echo "FAILED: $*" >&2; exit 1; }

rm -rf "$work" && mkdir -p "$work/elsewhere"
prefix=$work/prefix
"$cmake" --install "$build" --prefix "$prefix" >"$work/install.log" ||
  { cat "$work/install.log"; fail "cmake --install"; }
lenet5=$prefix/bin/lenet5
[ -x "$lenet5" ] || fail "no $lenet5"
for config in lenet5.toml fast.toml quick.toml; do
  [ -f "$prefix/share/lenet5/configs/$config" ] || fail "no $prefix/share/lenet5/configs/$config"
done

cd "$work/elsewhere"
"$lenet5" --help >help.txt || fail "--help exited $?"
grep -q "train" help.txt || fail "--help lists no train: $(cat help.txt)"
grep -q "quick.toml" help.txt || fail "--help names no shipped config: $(cat help.txt)"
"$lenet5" --version >version.txt || fail "--version exited $?"
grep -Eq '^lenet5 [0-9]+\.[0-9]+\.[0-9]+ \(commit ([0-9a-f]{7,}|unknown)\)$' version.txt ||
  fail "--version says '$(cat version.txt)', not 'lenet5 X.Y.Z (commit HASH)'"

# A bare name: the installed copy, the working folder holding no such file.
"$lenet5" --config lenet5.toml train --help >train-help.txt 2>&1 ||
  { cat train-help.txt; fail "--config lenet5.toml was not found from $PWD"; }
status=0
"$lenet5" --config no-such.toml train --help >missing.txt 2>&1 || status=$?
[ "$status" -eq 2 ] || { cat missing.txt; fail "--config no-such.toml exited $status, not 2"; }
grep -q "no-such.toml" missing.txt && grep -q "quick.toml" missing.txt &&
  grep -q "$prefix/share/lenet5/configs" missing.txt ||
  fail "the refusal does not name the name, the shipped configs and their folder: $(cat missing.txt)"
# A file of that name in the working folder comes first: this one's unknown key is refused.
mkdir -p own && printf '[train]\nlearning-rate = 0.1\n' >own/quick.toml
status=0
(cd own && "$lenet5" --config quick.toml train --help) >own.txt 2>&1 || status=$?
[ "$status" -eq 2 ] && grep -q "learning-rate" own.txt ||
  fail "--config quick.toml did not read ./quick.toml first (exit $status): $(cat own.txt)"

[ -f "$mnist/t10k-labels-idx1-ubyte" ] || [ -f "$mnist/t10k-labels-idx1-ubyte.gz" ] ||
  { echo "SKIPPED: the short training (MNIST is not in $mnist: run scripts/fetch_mnist.sh)"; exit 77; }
# quick.toml sets epochs = 1 and batch-size = 64 (the defaults are 20 and 128): the run folder's
# config.toml shows them when the shipped file was read; the command line's flags still win.
"$lenet5" -q --config quick.toml train --device cpu --data "$mnist" --train-limit 256 \
  --validation 0 --evaluate false --out run >train.log 2>&1 || { cat train.log; fail "train"; }
grep -q '^epochs=1$' run/config.toml && grep -q '^batch-size=64$' run/config.toml &&
  grep -q '^train-limit=256$' run/config.toml ||
  fail "run/config.toml does not hold quick.toml's settings: $(cat run/config.toml)"
[ -f run/last.safetensors ] || fail "the run saved no checkpoint"

# The data sets' fetcher, installed beside it, fills the working folder's data/mnist (offline, from
# MNIST_DIR as a mirror), where the installed program then finds MNIST without --data.
fetch=$prefix/bin/lenet5-fetch-mnist
[ -x "$fetch" ] || fail "no $fetch"
mkdir -p fresh && cd fresh
env -u LENET5_DATA LENET5_MNIST_MIRROR="$mnist" LENET5_FETCH_OFFLINE=1 "$fetch" >fetch.log 2>&1 ||
  { cat fetch.log; fail "lenet5-fetch-mnist"; }
[ -f data/mnist/t10k-labels-idx1-ubyte ] || fail "lenet5-fetch-mnist left no $PWD/data/mnist"
env -u LENET5_DATA "$lenet5" -q --config quick.toml train --device cpu --train-limit 256 \
  --validation 0 --evaluate false --out run >train.log 2>&1 || { cat train.log; fail "train without --data"; }
echo "installed into $prefix; ran from $PWD"
