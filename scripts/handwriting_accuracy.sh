#!/usr/bin/env bash
# How well a checkpoint reads the handwriting set of scripts/make_handwriting_set.py: every image
# goes through `lenet5 classify --json` (the program's own loading and preprocessing), and the
# accuracy is printed overall and per category (font family, face, polarity, clean or photo,
# size, stroke). An image the program refuses (for example "blank") counts as misread.
#
#   scripts/handwriting_accuracy.sh CHECKPOINT [--set DIR] [--misses] [--save-preprocessed DIR]
#                                   [-- CLASSIFY_ARGS...]
#
#   --set DIR                the set's folder (default data/handwriting)
#   --misses                 also list every misread image: file, truth, answer, categories
#   --save-preprocessed DIR  keep the 28x28 images the network saw (DIR/NNNN_D.png)
#   CLASSIFY_ARGS            passed to classify, for example --device cpu or --invert yes
#
# Environment: LENET5 (default build/lenet5). Needs only python3's standard library.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
say() { echo "handwriting_accuracy: $*" >&2; }

checkpoint="" set_dir="$root/data/handwriting" misses=0 save=""
classify_args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --set) set_dir=$2; shift 2 ;;
    --misses) misses=1; shift ;;
    --save-preprocessed) save=$2; shift 2 ;;
    --) shift; classify_args=("$@"); break ;;
    -h|--help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) say "unknown option '$1' (see --help)"; exit 2 ;;
    *) [ -z "$checkpoint" ] || { say "one checkpoint only (got '$checkpoint' and '$1')"; exit 2; }
       checkpoint=$1; shift ;;
  esac
done
[ -n "$checkpoint" ] || { say "no checkpoint given (see --help)"; exit 2; }
lenet5=${LENET5:-$root/build/lenet5}
[ -x "$lenet5" ] || { say "$lenet5 not found: build first (scripts/setup.sh) or set LENET5"; exit 1; }
labels="$set_dir/labels.csv"
[ -f "$labels" ] || { say "$labels not found: run scripts/make_handwriting_set.py --out $set_dir"; exit 1; }

json=$(mktemp)
trap 'rm -f "$json"' EXIT
# File names come from labels.csv's first column; the set's names hold no spaces or commas.
mapfile -t files < <(tail -n +2 "$labels" | cut -d, -f1 | sed "s|^|$set_dir/|")
save_args=()
[ -z "$save" ] || save_args=(--save-preprocessed "$save")
# classify exits non-zero when an image is refused; its JSON still holds every image.
"$lenet5" classify --checkpoint "$checkpoint" --json "${save_args[@]}" "${classify_args[@]}" \
  "${files[@]}" >"$json" 2>/dev/null || true
[ -s "$json" ] || { say "classify printed nothing: run it by hand to see why"; exit 1; }

python3 - "$labels" "$json" "$misses" "$checkpoint" <<'EOF'
import csv, json, os, sys
from collections import defaultdict

labels_path, json_path, show_misses, checkpoint = sys.argv[1:]
rows = {row["file"]: row for row in csv.DictReader(open(labels_path))}
answers = {os.path.basename(r["file"]): r for r in json.load(open(json_path))}
categories = ["family", "face", "polarity", "style", "size", "stroke"]
tally = defaultdict(lambda: [0, 0])  # (category, value) -> [right, total]
misses = []
for name, row in rows.items():
    answer = answers.get(name, {"error": "no answer"})
    right = "digit" in answer and answer["digit"] == int(row["digit"])
    for key in [("all", "")] + [(c, row[c]) for c in categories]:
        tally[key][0] += right
        tally[key][1] += 1
    if not right:
        got = answer.get("digit", answer.get("error", "?"))
        misses.append(f"  {name}  truth {row['digit']}  read {got}  " +
                      " ".join(row[c] for c in categories))

right, total = tally[("all", "")]
print(f"{checkpoint}: {right}/{total} = {100.0 * right / total:.1f} % of the handwriting set")
for category in categories:
    print(f"{category}:")
    for (c, value), (r, n) in sorted(tally.items()):
        if c == category:
            print(f"  {value:<26} {100.0 * r / n:5.1f} %  ({r}/{n})")
if show_misses == "1":
    print(f"misread ({len(misses)}):")
    print("\n".join(misses))
EOF
