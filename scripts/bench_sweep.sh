#!/usr/bin/env bash
# Measures packed sweeps on the GPU against one model (docs/results.md): the wall time of
# `lenet5 train` with a config, then of `lenet5 sweep` with the same config over 16 and 64 seeds
# (packed into one GPU run each), their aggregate training rate, and the GPU memory each extra
# model costs (the process's peak, sampled with nvidia-smi every 50 ms).
#
#   scripts/bench_sweep.sh [--config configs/fast.toml] [--models 16,64] [--repeat 3]
#                          [-- extra train/sweep flags]
#
# Prints one row per run and then the figures the targets name:
#   - wall time of N models over the median wall time of one model (the target: <= 2 for 16);
#   - training images per second over all models, from the lead model's epoch times in its
#     metrics.csv (a packed epoch's time: the step launches of every model, evaluation excluded),
#     and over the sweep's whole wall time (start-up, evaluations and checkpoints included);
#   - (peak memory with N models - with the fewest) / (the difference in models).
# Environment: LENET5 (default build/lenet5), LENET5_DATA (MNIST folder, default data/mnist).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
config=configs/fast.toml models_list=16,64 repeat=3
while [ $# -gt 0 ]; do
  case "$1" in
    --config) config=$2; shift 2 ;;
    --models) models_list=$2; shift 2 ;;
    --repeat) repeat=$2; shift 2 ;;
    --) shift; break ;;
    -h|--help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench_sweep: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
lenet5=${LENET5:-build/lenet5}
data=${LENET5_DATA:-data/mnist}
command -v nvidia-smi >/dev/null || { echo "bench_sweep: nvidia-smi not found: it needs a GPU" >&2; exit 2; }
calc() { python3 -c "print($1)"; }  # arithmetic in floating point
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# run NAME CMD...: runs CMD, sampling the GPU memory of its process; prints "seconds peak_mib".
run() {
  local name=$1; shift
  local start end peak=0 pid used
  start=$(date +%s.%N)
  "$@" > "$work/$name.log" 2>&1 &
  pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    used=$(nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits 2>/dev/null |
           awk -F', ' -v p="$pid" '$1 == p {print $2}')
    [ -n "$used" ] && [ "$used" -gt "$peak" ] && peak=$used
    sleep 0.05
  done
  wait "$pid" || { echo "bench_sweep: $name failed:" >&2; tail -20 "$work/$name.log" >&2; exit 1; }
  end=$(date +%s.%N)
  echo "$(calc "$end - $start") $peak"
}

# Training images per second of a packed run: models x images of an epoch / the lead model's
# epoch seconds, summed over the epochs (metrics.csv: images_per_s x seconds = the epoch's images).
rate_of() {
  local folder=$1 models=$2
  python3 - "$folder" "$models" <<'EOF'
import csv, pathlib, sys
folder, models = pathlib.Path(sys.argv[1]), int(sys.argv[2])
lead = folder if (folder / "metrics.csv").exists() else \
    sorted(p for p in folder.iterdir() if (p / "metrics.csv").exists())[0]
rows = list(csv.DictReader(open(lead / "metrics.csv")))
seconds = sum(float(r["seconds"]) for r in rows)
images = sum(float(r["images_per_s"]) * float(r["seconds"]) for r in rows)
print(f"{models * images / seconds:.0f} {seconds:.3f} {models * images:.0f}")
EOF
}

echo "| run | models | wall (s) | peak GPU memory (MiB) | training images/s (epoch times) | images/s over the wall time |"
echo "|---|---|---|---|---|---|"
"$lenet5" -q train --config "$config" --data "$data" --out "$work/warm" "$@" > /dev/null 2>&1 || true
ones=()
for k in $(seq 1 "$repeat"); do
  read -r seconds peak < <(run "one-$k" "$lenet5" train --config "$config" --data "$data" \
                                --out "$work/one-$k" "$@")
  ones+=("$seconds")
  read -r rate _ images < <(rate_of "$work/one-$k" 1)
  echo "| train | 1 | $(printf %.3f "$seconds") | $peak | $rate | $(printf %.0f "$(calc "$images / $seconds")") |"
done
one=$(printf '%s\n' "${ones[@]}" | sort -g | awk '{a[NR]=$1} END{print a[int((NR+1)/2)]}')
declare -A peaks walls
for models in ${models_list//,/ }; do
  out="$work/sweep-$models"
  read -r seconds peak < <(run "sweep-$models" "$lenet5" sweep --config "$config" --data "$data" \
                                --seeds "1-$models" --out "$out" "$@")
  read -r rate train_seconds images < <(rate_of "$out" "$models")
  wall_rate=$(calc "$images / $seconds")
  peaks[$models]=$peak walls[$models]=$seconds
  echo "| sweep | $models | $(printf %.3f "$seconds") | $peak | $rate | $(printf %.0f "$wall_rate") |"
done
echo
echo "one model: median wall $(printf %.3f "$one") s over $repeat runs"
first=""
for models in ${models_list//,/ }; do
  echo "$models models: wall $(printf %.2f "$(calc "${walls[$models]} / $one")")x one model's"
  if [ -z "$first" ]; then
    first=$models
  else
    per=$(calc "(${peaks[$models]} - ${peaks[$first]}) / ($models - $first)")
    echo "GPU memory per extra model ($first -> $models models): $(printf %.2f "$per") MiB"
  fi
done
