#!/usr/bin/env bash
# The page of `lenet5 serve` in a real browser (ctest serve.page, label cpu): trains a short CPU
# run, serves it on a free loopback port, and drives Debian's chromium with puppeteer-core
# (serve_page.mjs): draws a 7, checks the answer, the layers' tiles, the runs view's curve, and
# its confusion heat map and gallery of misread digits (with a cell's filter), a Fashion-MNIST run's
# (named in its classes), and a sweep's chart (a band and a legend entry per setting) and summary
# table; the charts' round tick values and epoch ticks, the page's icon, and its header on a
# 360-px-wide phone. Screenshots (phone.png and phone-runs.png at 360 px), and the drawn 7 as the
# page posts it (drawn-7.png), go to the test's folder. Exit 77 (ctest:
# skipped) with the reason when chromium, node or puppeteer-core is missing (scripts/setup.sh
# installs them).
#   serve_page.sh LENET5_BINARY WORK_DIR NODE_MODULES_DIR MNIST_DIR
set -euo pipefail
lenet5=$1 work=$2 node_modules=$3 mnist=$4
here=$(cd "$(dirname "$0")" && pwd)
skip() { echo "SKIPPED: $*"; exit 77; }

chromium=${LENET5_CHROMIUM:-$(command -v chromium || command -v chromium-browser || true)}
[ -n "$chromium" ] || skip "chromium is not installed (scripts/setup.sh installs it)"
command -v node >/dev/null || skip "node is not installed (scripts/setup.sh installs it)"
[ -d "$node_modules/puppeteer-core" ] || skip "puppeteer-core is not in $node_modules (scripts/setup.sh installs it)"
[ -f "$mnist/t10k-labels-idx1-ubyte" ] || [ -f "$mnist/t10k-labels-idx1-ubyte.gz" ] ||
  { echo "MNIST is not in $mnist: run scripts/fetch_mnist.sh"; exit 1; }

rm -rf "$work" && mkdir -p "$work/runs"
# 8,000 images, 2 epochs: about 90% on the test set, enough to read a clearly drawn 7.
"$lenet5" -q train --device cpu --data "$mnist" --train-limit 8000 --epochs 2 --seed 1 \
  --evaluate-training-set true --out "$work/runs/short" >"$work/train.log" 2>&1 || { cat "$work/train.log"; exit 1; }

# A sweep of two settings over two seeds: the runs view shows it as one chart, a band per setting.
"$lenet5" -q sweep --device cpu --data "$mnist" --train-limit 1000 --batch-size 32 --epochs 3 --seeds 1-2 \
  --set lr=0.02,0.1 --out "$work/runs/sweep-a" >"$work/sweep.log" 2>&1 || { cat "$work/sweep.log"; exit 1; }

# A Fashion-MNIST run, on a stand-in: MNIST's first 2,000 training and 500 test images under new
# counts, whose checksums are no data set's, so they pass for Fashion-MNIST's files. The runs view
# names its classes; serve reads its test set from $LENET5_DATA (--data holds MNIST's). Its name
# sorts after "short", the run the view shows first.
node - "$mnist" "$work/fashion" <<'EOF'
const fs = require('fs'), zlib = require('zlib');
const [, , from, to] = process.argv;
fs.mkdirSync(to, { recursive: true });
for (const [name, count] of [['train-images-idx3-ubyte', 2000], ['train-labels-idx1-ubyte', 2000],
                             ['t10k-images-idx3-ubyte', 500], ['t10k-labels-idx1-ubyte', 500]]) {
  const file = `${from}/${name}`;
  const idx = fs.existsSync(file) ? fs.readFileSync(file) : zlib.gunzipSync(fs.readFileSync(`${file}.gz`));
  const header = 4 + 4 * idx[3], item = (idx.length - header) / idx.readUInt32BE(4);
  const subset = Buffer.from(idx.subarray(0, header + count * item));
  subset.writeUInt32BE(count, 4);
  fs.writeFileSync(`${to}/${name}`, subset);
}
EOF
"$lenet5" -q train --device cpu --dataset fashion-mnist --data "$work/fashion" --epochs 1 --seed 1 \
  --validation 200 \
  --out "$work/runs/wardrobe" >"$work/fashion.log" 2>&1 || { cat "$work/fashion.log"; exit 1; }

LENET5_DATA="$work/fashion" "$lenet5" serve --checkpoint "$work/runs/short/best.safetensors" \
  --runs "$work/runs" --data "$mnist" --port 0 >"$work/serve.log" 2>&1 &
server=$!
trap 'kill "$server" 2>/dev/null; wait "$server" 2>/dev/null || true' EXIT
url=""
for _ in $(seq 100); do
  url=$(grep -o 'http://[^ ]*' "$work/serve.log" || true)
  [ -n "$url" ] && break
  sleep 0.1
done
[ -n "$url" ] || { echo "the server did not start:"; cat "$work/serve.log"; exit 1; }

NODE_PATH="$node_modules" LENET5_CHROMIUM="$chromium" node "$here/serve_page.mjs" "$url" "$work"
