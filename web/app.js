// The page of `lenet5 serve`: draw a digit and watch LeNet-5 answer layer by layer; the Runs tab
// is runs.js (loaded after this file, sharing its globals: $, diverging, showView's showRuns). It
// talks to the server through /api/ only (docs/usage.md: the JSON API) and needs no library.
'use strict';

const $ = (id) => document.getElementById(id);
const LAYER_TITLES = {
  c1: 'convolution 5×5',
  s2: 'subsampling',
  c3: 'convolution 5×5',
  s4: 'subsampling',
  c5: 'convolution 5×5',
  f6: 'fully connected',
  output: 'fully connected',
};
let model = null;  // /api/model

// What a layer is in the checkpoint shown: its C1 and C3 units, subsampling and output layer are
// settings.
function layerTitle(name) {
  if (name === 'output' && model?.net?.output === 'rbf') return 'Euclidean RBF units';
  if ((name === 'c1' || name === 'c3') && model?.net?.conv_units === 'squashed')
    return 'convolution 5×5, bias, squashed';
  if ((name === 's2' || name === 's4') && model?.net?.subsampling === 'trainable')
    return 'trainable subsampling';
  return LAYER_TITLES[name] || '';
}

// ---- colours: ColorBrewer RdBu (blue negative, white zero, red positive), as src/pictures
const STOPS = [[5, 48, 97], [67, 147, 195], [247, 247, 247], [214, 96, 77], [103, 0, 31]];
function diverging(t) {
  t = Math.min(1, Math.max(0, t)) * (STOPS.length - 1);
  const i = Math.min(STOPS.length - 2, Math.floor(t)), f = t - i;
  return STOPS[i].map((c, k) => Math.round(c + f * (STOPS[i + 1][k] - c)));
}
const maxAbs = (values) => values.reduce((m, v) => Math.max(m, Math.abs(v)), 0) || 1;

// The diverging map in 256 shades, looked up per cell: an answer paints about 8,000 cells, and
// computing each colour anew (arrays per cell) cost more than the rest of drawing it.
const SHADES = new Uint8ClampedArray(256 * 3);
for (let k = 0; k < 256; k++) SHADES.set(diverging(k / 255), 3 * k);

// A canvas of w x h cells drawn `scale` CSS pixels per cell (nearest neighbour).
function mapCanvas(w, h, scale) {
  const canvas = document.createElement('canvas');
  canvas.width = w;
  canvas.height = h;
  canvas.style.width = `${w * scale}px`;
  canvas.style.height = `${h * scale}px`;
  return canvas;
}
// Paints values[offset ...] on `canvas` on the diverging map over [-range, range], reusing the
// canvas's pixel buffer. Returns whether every value is the same.
function paintMap(canvas, values, offset, range) {
  const n = canvas.width * canvas.height, ctx = canvas.getContext('2d');
  canvas.pixels = canvas.pixels || ctx.createImageData(canvas.width, canvas.height);
  const d = canvas.pixels.data, first = values[offset];
  let uniform = true;
  for (let i = 0; i < n; i++) {
    const v = values[offset + i];
    uniform = uniform && v === first;
    const k = 3 * Math.round(255 * Math.min(1, Math.max(0, 0.5 + v / (2 * range))));
    d[4 * i] = SHADES[k];
    d[4 * i + 1] = SHADES[k + 1];
    d[4 * i + 2] = SHADES[k + 2];
    d[4 * i + 3] = 255;
  }
  ctx.putImageData(canvas.pixels, 0, 0);
  return uniform;
}
function filterCanvas(values, offset, range, scale) {
  const canvas = mapCanvas(5, 5, scale);
  paintMap(canvas, values, offset, range);
  return canvas;
}

// ---- drawing pad: pointer events (mouse, pen, finger), sent once per frame, one request in flight
const pad = $('pad'), padCtx = pad.getContext('2d');
let drawing = false, last = null, dirty = false, inFlight = false;
function clearPad() {
  padCtx.fillStyle = '#fff';
  padCtx.fillRect(0, 0, pad.width, pad.height);
}
function padPoint(event) {
  const box = pad.getBoundingClientRect();
  return [
    (event.clientX - box.left) * pad.width / box.width,
    (event.clientY - box.top) * pad.height / box.height
  ];
}
function stroke(from, to) {
  padCtx.strokeStyle = '#000';
  padCtx.lineWidth = 18;
  padCtx.lineCap = padCtx.lineJoin = 'round';
  padCtx.beginPath();
  padCtx.moveTo(...from);
  padCtx.lineTo(...to);
  padCtx.stroke();
  dirty = true;
}
pad.addEventListener('pointerdown', (e) => {
  drawing = true;
  last = padPoint(e);
  pad.setPointerCapture(e.pointerId);
  stroke(last, last);
});
pad.addEventListener('pointermove', (e) => {
  if (!drawing) return;
  const point = padPoint(e);
  stroke(last, point);
  last = point;
});
for (const type of ['pointerup', 'pointercancel'])
  pad.addEventListener(type, () => {
    drawing = false;
  });
$('clear').addEventListener('click', () => {
  clearPad();
  showBlank();
});

// Once per frame: the newest answer is drawn (answers land between frames; drawing them here
// keeps that work at the frame's start), then the pad, if drawn on since, is sent, unless a
// request is still in flight: at most one at a time, so answers never queue up behind the pen.
let pendingAnswer = null;
function frame() {
  if (pendingAnswer) {
    showAnswer(pendingAnswer);
    pendingAnswer = null;
  }
  if (dirty && !inFlight) {
    dirty = false;
    inFlight = true;
    pad.toBlob(
        (blob) => classify(blob, 'image/png').finally(() => {
          inFlight = false;
        }),
        'image/png');
  }
  requestAnimationFrame(frame);
}

// ---- dropping or opening an image file
pad.addEventListener('dragover', (e) => {
  e.preventDefault();
  pad.classList.add('dragover');
});
pad.addEventListener('dragleave', () => pad.classList.remove('dragover'));
pad.addEventListener('drop', (e) => {
  e.preventDefault();
  pad.classList.remove('dragover');
  if (e.dataTransfer.files.length) classifyFile(e.dataTransfer.files[0]);
});
$('file').addEventListener('change', (e) => {
  if (e.target.files.length) classifyFile(e.target.files[0]);
});
function classifyFile(file) {
  const url = URL.createObjectURL(file), image = new Image();
  image.onload = () => {  // show it on the pad, fitted, then classify the file itself
    clearPad();
    const s = Math.min(pad.width / image.width, pad.height / image.height);
    padCtx.drawImage(
        image, (pad.width - image.width * s) / 2, (pad.height - image.height * s) / 2,
        image.width * s, image.height * s);
    URL.revokeObjectURL(url);
  };
  image.src = url;
  classify(file, file.type || 'image/png');
}

async function classify(body, type) {
  try {
    const response =
        await fetch('api/classify', {method: 'POST', headers: {'Content-Type': type}, body});
    const answer = await response.json();
    if (!response.ok) {
      showBlank(answer.error);
      return;
    }
    pendingAnswer = answer;
  } catch (error) {
    showBlank(`the server did not answer (${error.message})`);
  }
}

// ---- the answer
function showBlank(message) {
  pendingAnswer = null;  // an answer for what was on the pad before
  $('prediction').textContent = '–';
  $('message').textContent = message && !/blank/.test(message) ? message : '';
  showBars(null);
}
// Output k's name: the checkpoint's class names (/api/model), the digit itself until they come.
const className = k => model?.classes?.[k] ?? String(k);
// Whether a data set's classes (/api/model's or an evaluation's "classes") are their own numbers,
// as MNIST's digits are; then its class noun ("digit") also names what is drawn and misread.
const numberedClasses = (classes) => (classes ?? []).every((name, k) => name === String(k));
function showBars(probabilities, prediction) {
  const bars = $('bars');
  if (!bars.children.length)
    for (let k = 0; k < 10; k++)
      bars.insertAdjacentHTML(
          'beforeend',
          `<div class="bar"><span>${
              k}</span><div class="track"><div class="fill"></div></div><span class="p"></span></div>`);
  bars.classList.toggle('named', (model?.classes ?? []).some(name => name.length > 1));
  const top = probabilities ? prediction : -1;
  [...bars.children].forEach((bar, k) => {
    const p = probabilities ? probabilities[k] : 0;
    bar.querySelector('span').textContent = className(k);
    bar.querySelector('.fill').style.width = `${100 * p}%`;
    bar.querySelector('.p').textContent = probabilities ? `${(100 * p).toFixed(1)}%` : '';
    bar.classList.toggle('top', k === top);
  });
}
function showAnswer(answer) {
  $('prediction').textContent = className(answer.prediction);
  const notes = [];
  if (!answer.inverted) notes.push('read as light ink on a dark background');
  // The RBF output's MAP criterion leaves part of the probability to "none of these".
  if (model?.net?.output === 'rbf')
    notes.push(`none of these: ${
        (100 * Math.max(0, 1 - answer.probabilities.reduce((a, b) => a + b, 0))).toFixed(1)}%`);
  $('message').textContent = notes.join(' · ');
  showBars(answer.probabilities, answer.prediction);
  const input = $('input28').getContext('2d'), image = input.createImageData(28, 28);
  answer.input28.forEach((v, i) => image.data.set([v, v, v, 255], 4 * i));
  input.putImageData(image, 0, 0);
  showLayers(answer.layers);
}

// One row per layer: its maps as tiles (a vector layer as one strip), its own symmetric range.
// The rows and canvases are made for the first answer and repainted in place for every later one
// (the shapes never change), so an answer while drawing costs the painting alone.
function showLayers(layers) {
  const root = $('layers');
  if (!root.children.length) {
    for (const layer of layers) root.appendChild(layerRow(layer));
    connectC3Hover();
  }
  layers.forEach((layer, k) => {
    const [c, h, w] = layer.shape, range = maxAbs(layer.values), row = root.children[k];
    row.querySelector('.range').textContent = `±${range.toFixed(3)}`;
    row.querySelectorAll('canvas').forEach((canvas, m) => {
      const uniform = paintMap(canvas, layer.values, m * h * w, range);
      if (h === 1 && w === 1) return;  // the strip of a vector layer
      // A map whose every value is the same draws as one colour: with ReLU, a map this digit
      // does not excite at all. Said in its title, and marked for the page's test.
      canvas.dataset.uniform = uniform;
      canvas.title = `${layer.name} map ${m}` + (uniform ? `: every value ${layer.values[m * h * w]}` : '');
    });
  });
}
function layerRow(layer) {
  const [c, h, w] = layer.shape;
  const row = document.createElement('div');
  row.className = 'layer';
  row.dataset.layer = layer.name;
  row.innerHTML = `<div class="name">${layer.name.toUpperCase()} <small>${c}×${h}×${w}, ${
                      layerTitle(layer.name)}</small></div>` +
      `<div class="range"></div><div class="maps"></div>`;
  const maps = row.querySelector('.maps');
  if (h === 1 && w === 1) {
    const strip = mapCanvas(c, 1, c > 20 ? 6 : 24);
    strip.style.height = '24px';  // one row of cells, tall enough to see
    maps.appendChild(strip);
  } else {
    const scale = Math.max(2, Math.round(56 / h));
    for (let m = 0; m < c; m++) {
      const canvas = mapCanvas(w, h, scale);
      canvas.dataset.map = m;
      maps.appendChild(canvas);
    }
  }
  return row;
}

// Hovering C3 map j outlines the S2 maps that feed it (the C3 table), and its column of filters.
function connectC3Hover() {
  const s2 = document.querySelectorAll('[data-layer="s2"] canvas');
  document.querySelectorAll('[data-layer="c3"] canvas').forEach((canvas) => {
    const j = Number(canvas.dataset.map);
    canvas.addEventListener('mouseenter', () => highlightC3(j, true, s2, canvas));
    canvas.addEventListener('mouseleave', () => highlightC3(j, false, s2, canvas));
  });
}
function highlightC3(j, on, s2, canvas) {
  if (!model) return;
  canvas.classList.toggle('hovered', on);
  s2.forEach((map, i) => map.classList.toggle('feeds', on && model.c3.table[j][i]));
  document.querySelectorAll(`#filters-c3 td[data-map="${j}"]`)
      .forEach((td) => td.classList.toggle('feeds', on));
}

// ---- the checkpoint: its settings and filters
function showModel() {
  // The test set's accuracy, and the held-out training images' where the run held some out (they
  // chose best.safetensors); a checkpoint saved in mid-epoch has neither.
  const accuracy = model.test_accuracy, heldOut = model.validation_accuracy;
  // "Draw a digit"; for another data set, whose class noun is "class", what it is drawn from.
  $('draw-title').textContent = numberedClasses(model.classes) ?
      `Draw a ${model.class_noun}` :
      `Draw one of ${model.dataset_title}'s ${model.classes.length} classes`;
  const net = model.net;
  const parts = [`${net.activation}`, `${net.subsampling} pooling`, `${net.c3_table} C3 table`];
  if (net.conv_units === 'squashed') parts.push('squashed C1 and C3 (LeCun 1998)');
  if (net.output === 'rbf') parts.push('RBF output (LeCun 1998)');
  const info = $('model-info');
  info.textContent =
      `${model.checkpoint} · ${model.dataset_title} · epoch ${model.epoch}` +
      (accuracy != null ? ` · test ${(100 * accuracy).toFixed(2)}%` : '') +
      (heldOut != null ?
           ` · ${model.validation_images} held out ${(100 * heldOut).toFixed(2)}%` :
           '') +
      ` · ${parts.join(', ')}`;
  info.title = info.textContent;  // the whole line, where a narrow screen cuts it
  const c1 = model.c1, c1Range = maxAbs(c1.values), c1Root = $('filters-c1');
  for (let m = 0; m < 6; m++) c1Root.appendChild(filterCanvas(c1.values, m * 25, c1Range, 8));
  const c3 = model.c3, c3Range = maxAbs(c3.values), table = document.createElement('table');
  table.insertAdjacentHTML(
      'beforeend',
      `<tr><th></th>${[...Array(16).keys()].map((j) => `<th>${j}</th>`).join('')}</tr>`);
  for (let i = 0; i < 6; i++) {
    const row = document.createElement('tr');
    row.innerHTML = `<th>S2 ${i}</th>`;
    for (let j = 0; j < 16; j++) {
      const cell = document.createElement('td');
      cell.dataset.map = j;
      if (c3.table[j][i])
        cell.appendChild(filterCanvas(c3.values, (j * 6 + i) * 25, c3Range, 5));
      else
        cell.innerHTML = '<div style="width:25px;height:25px;background:#bebebe"></div>';
      row.appendChild(cell);
    }
    table.appendChild(row);
  }
  $('filters-c3').appendChild(table);
  $('legend').innerHTML = `−max<span class="legend-bar"></span>+max`;
}

// ---- the API's JSON; an error answer's message as the exception's
async function getJson(url) {
  const response = await fetch(url);
  if (!response.ok) throw new Error((await response.json()).error);
  return response.json();
}

// ---- views
function showView(name) {
  $('view-draw').hidden = name !== 'draw';
  $('view-runs').hidden = name !== 'runs';
  $('tab-draw').classList.toggle('active', name === 'draw');
  $('tab-runs').classList.toggle('active', name === 'runs');
  if (name === 'runs')
    showRuns().catch((e) => {
      $('run-title').textContent = e.message;
    });
  else
    clearTimeout(runsState.timer);
}
$('tab-draw').addEventListener('click', () => showView('draw'));
$('tab-runs').addEventListener('click', () => showView('runs'));

clearPad();
showBlank();
getJson('api/model')
    .then((m) => {
      model = m;
      showModel();
    })
    .catch((e) => {
      $('message').textContent = e.message;
    });
requestAnimationFrame(frame);
