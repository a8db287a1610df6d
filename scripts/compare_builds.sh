#!/usr/bin/env bash
# Same behaviour, measured: trains the README's main command with two lenet5 binaries (say, the
# build of a commit before a refactoring and the build after it) and compares the checkpoints
# byte for byte, then times both with `lenet5 bench` in alternating rounds on the same machine.
#
#   scripts/compare_builds.sh OLD_LENET5 NEW_LENET5 [--kernels LIST] [--configs LIST]
#                             [--rounds N] [--epochs N] [--train-epochs N]
#
# --kernels: the kernel sets to compare (default whole-step,fast,book), each a name or
# NAME:PRECISION for a --precision of its own (e.g. tensor:tf32); "cpu" in the list compares the
# CPU backend on a short run (3,000 images, 2 epochs: the whole command takes minutes there).
# --configs: the configs the benches time, by name in configs/ (default lenet5). --rounds: bench
# rounds per binary, kernel set and config (default 3), alternating old and new so that drift of
# the machine falls on both. --epochs: epochs per bench round (default 10). --train-epochs: cut the
# checkpoints' trainings to N epochs (default: the config's 20).
# Prints one line per comparison (with bench's own epoch without augmentation where it reports
# one) and ends with "same behaviour: yes" or "no" (exit 1 if no).
# Environment: LENET5_DATA (MNIST folder, default data/mnist).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
[ $# -ge 2 ] || { sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
old=$(realpath "$1") new=$(realpath "$2")
shift 2
kernels=whole-step,fast,book configs=lenet5 rounds=3 epochs=10 train_epochs=
while [ $# -gt 0 ]; do
  case "$1" in
    --kernels) kernels=$2; shift 2 ;;
    --configs) configs=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --epochs) epochs=$2; shift 2 ;;
    --train-epochs) train_epochs=$2; shift 2 ;;
    *) echo "compare_builds: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
for binary in "$old" "$new"; do
  [ -x "$binary" ] || { echo "compare_builds: $binary is not an executable" >&2; exit 2; }
done
[[ $kernels =~ ^[a-z0-9-]+(:[a-z0-9]+)?(,[a-z0-9-]+(:[a-z0-9]+)?)*$ ]] || {
  echo "compare_builds: --kernels '$kernels': give kernel sets separated by commas, each a name or NAME:PRECISION (e.g. whole-step,tensor:tf32)" >&2
  exit 2
}
for config in ${configs//,/ }; do
  [ -f "configs/$config.toml" ] ||
    { echo "compare_builds: --configs: no configs/$config.toml" >&2; exit 2; }
done
data=${LENET5_DATA:-data/mnist}
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
same=yes

kernel_args() {  # --kernels NAME [--precision PRECISION] for one entry of --kernels
  local args="--kernels ${1%%:*}"
  [[ $1 != *:* ]] || args+=" --precision ${1#*:}"
  echo "$args"
}

train_args() {  # the README's main command for one kernel set
  if [ "$1" = cpu ]; then
    echo "--config configs/lenet5.toml --data $data --device cpu --train-limit 3000 --epochs 2"
  else
    echo "--config configs/lenet5.toml --data $data --device gpu $(kernel_args "$1")" \
      "${train_epochs:+--epochs $train_epochs}"
  fi
}

for set in ${kernels//,/ }; do
  tag=${set//:/-}
  for side in old new; do
    binary=$old; [ $side = new ] && binary=$new
    # shellcheck disable=SC2046
    "$binary" train $(train_args "$set") --out "$scratch/$tag-$side" -q >/dev/null
  done
  for file in last.safetensors best.safetensors config.toml; do
    a=$(sha256sum <"$scratch/$tag-old/$file" | cut -c1-64)
    b=$(sha256sum <"$scratch/$tag-new/$file" | cut -c1-64)
    verdict=identical
    [ "$a" = "$b" ] || { verdict=DIFFERENT; same=no; }
    echo "checkpoint $set $file: $verdict (old ${a:0:12}, new ${b:0:12})"
  done
done

median() { sort -g | awk '{v[NR]=$1} END {print (NR % 2) ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2}'; }
field() {  # the number after "$1": in a seed line, or nothing where it is null or absent
  sed -nE "s/.*\"$1\":([0-9.eE+-]+).*/\\1/p"
}
for config in ${configs//,/ }; do
  for set in ${kernels//,/ }; do
    [ "$set" = cpu ] && continue
    for side in old new; do : >"$scratch/$side.times"; : >"$scratch/$side.plain"; done
    for _ in $(seq "$rounds"); do
      for side in old new; do
        binary=$old; [ $side = new ] && binary=$new
        # shellcheck disable=SC2046
        "$binary" bench --config "configs/$config.toml" --data "$data" --device gpu \
            $(kernel_args "$set") --epochs "$epochs" -q | grep '"event":"seed"' >"$scratch/seed"
        field median_epoch_s <"$scratch/seed" >>"$scratch/$side.times"
        field median_epoch_s_no_augment <"$scratch/seed" >>"$scratch/$side.plain"
      done
    done
    t_old=$(median <"$scratch/old.times") t_new=$(median <"$scratch/new.times")
    plain=
    if [ -s "$scratch/old.plain" ] && [ -s "$scratch/new.plain" ]; then
      plain=$(awk -v a="$(median <"$scratch/old.plain")" -v b="$(median <"$scratch/new.plain")" \
        'BEGIN { printf "; without augmentation old %.2f ms, new %.2f ms, new/old %.3f",
                        1000 * a, 1000 * b, b / a }')
    fi
    awk -v s="$set" -v c="$config" -v a="$t_old" -v b="$t_new" -v r="$rounds" -v p="$plain" 'BEGIN {
      printf "epoch time %s, %s: old %.2f ms, new %.2f ms, new/old %.3f (median of %d rounds)%s\n",
             s, c, 1000 * a, 1000 * b, b / a, r, p }'
  done
done
echo "same behaviour: $same"
[ $same = yes ]
