#!/usr/bin/env bash
# Same behaviour, measured: trains the README's main command with two lenet5 binaries (say, the
# build of a commit before a refactoring and the build after it) and compares the checkpoints
# byte for byte, then times both with `lenet5 bench` in alternating rounds on the same machine.
#
#   scripts/compare_builds.sh OLD_LENET5 NEW_LENET5 [--kernels LIST] [--rounds N] [--epochs N]
#
# --kernels: the GPU kernel sets to compare (default whole-step,fast,book); "cpu" in the list
# compares the CPU backend on a short run (3,000 images, 2 epochs: the whole command takes minutes
# there). --rounds: bench rounds per binary and kernel set (default 3), alternating old and new so
# that drift of the machine falls on both. --epochs: epochs per bench round (default 10).
# Prints one line per comparison and ends with "same behaviour: yes" or "no" (exit 1 if no).
# Environment: LENET5_DATA (MNIST folder, default data/mnist).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
[ $# -ge 2 ] || { sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
old=$(realpath "$1") new=$(realpath "$2")
shift 2
kernels=whole-step,fast,book rounds=3 epochs=10
while [ $# -gt 0 ]; do
  case "$1" in
    --kernels) kernels=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --epochs) epochs=$2; shift 2 ;;
    *) echo "compare_builds: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
for binary in "$old" "$new"; do
  [ -x "$binary" ] || { echo "compare_builds: $binary is not an executable" >&2; exit 2; }
done
data=${LENET5_DATA:-data/mnist}
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
same=yes

train_args() {  # the README's main command for one kernel set
  if [ "$1" = cpu ]; then
    echo "--config configs/lenet5.toml --data $data --device cpu --train-limit 3000 --epochs 2"
  else
    echo "--config configs/lenet5.toml --data $data --device gpu --kernels $1"
  fi
}

for set in ${kernels//,/ }; do
  for side in old new; do
    binary=$old; [ $side = new ] && binary=$new
    # shellcheck disable=SC2046
    "$binary" train $(train_args "$set") --out "$scratch/$set-$side" -q >/dev/null
  done
  for file in last.safetensors best.safetensors config.toml; do
    a=$(sha256sum <"$scratch/$set-old/$file" | cut -c1-64)
    b=$(sha256sum <"$scratch/$set-new/$file" | cut -c1-64)
    verdict=identical
    [ "$a" = "$b" ] || { verdict=DIFFERENT; same=no; }
    echo "checkpoint $set $file: $verdict (old ${a:0:12}, new ${b:0:12})"
  done
done

median() { sort -g | awk '{v[NR]=$1} END {print (NR % 2) ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2}'; }
for set in ${kernels//,/ }; do
  [ "$set" = cpu ] && continue
  : >"$scratch/old.times"
  : >"$scratch/new.times"
  for _ in $(seq "$rounds"); do
    for side in old new; do
      binary=$old; [ $side = new ] && binary=$new
      "$binary" bench --config configs/lenet5.toml --data "$data" --device gpu --kernels "$set" \
          --epochs "$epochs" -q | grep '"event":"seed"' |
          sed -E 's/.*"median_epoch_s":([0-9.eE+-]+).*/\1/' >>"$scratch/$side.times"
    done
  done
  t_old=$(median <"$scratch/old.times") t_new=$(median <"$scratch/new.times")
  awk -v s="$set" -v a="$t_old" -v b="$t_new" -v r="$rounds" 'BEGIN {
    printf "epoch time %s: old %.2f ms, new %.2f ms, new/old %.3f (median of %d rounds)\n",
           s, 1000 * a, 1000 * b, b / a, r }'
done
echo "same behaviour: $same"
[ $same = yes ]
