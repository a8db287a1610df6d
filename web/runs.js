// The Runs tab of `lenet5 serve`'s page: the run folders, their curves and settings, and the chosen
// run's checkpoint on its data set's test set (confusion matrix and misread images, named in the
// data set's classes). Loaded after app.js, whose helpers ($, diverging, getJson,
// numberedClasses) it shares; /api/ only, no library.
'use strict';

// ---- runs: list, curves (train solid, training set evaluated dotted, test dashed), config; the
// chosen run polled while shown
const runsState = {
  chosen: null,
  compared: null,
  data: {},
  timer: null
};
// What the list says of a run's accuracy: its evaluated checkpoint's (best or last, and its
// epoch), which the evaluation below shows, else the last epoch's in metrics.csv.
function runAccuracy(run) {
  const c = run.checkpoint;
  if (c && c.test_accuracy != null) {
    const which = c.file.startsWith('best') ? 'best' : 'last';
    const chosen = c.validation_accuracy != null ?
        ` (the epoch the ${c.validation_images} held-out training images read best: ` +
            `${c.validation_accuracy.toFixed(2)}%)` :
        '';
    return {
      text: ` · ${which} ${c.test_accuracy.toFixed(2)}% (ep ${c.epoch})`,
      title: `test accuracy of ${c.file}, epoch ${c.epoch}${chosen}: the checkpoint evaluated below` +
          (run.test_accuracy != null ?
               `; epoch ${run.test_accuracy_epoch}, the last tested: ${run.test_accuracy.toFixed(2)}%` :
               '')
    };
  }
  if (run.test_accuracy == null) return {text: '', title: ''};
  return {
    text: ` · ${run.test_accuracy.toFixed(2)}% (ep ${run.test_accuracy_epoch})`,
    title: `test accuracy of epoch ${run.test_accuracy_epoch}, the last tested (no checkpoint yet)`
  };
}

async function showRuns() {
  const {runs, links} = await getJson('api/runs');
  const list = $('runs');
  list.textContent = '';
  if (!runs.length)
    list.innerHTML = '<li>No runs in the runs folder (lenet5 serve --runs DIR).</li>';
  const sweeps = new Set(runs.filter((run) => run.sweep).map((run) => run.name));
  for (const run of runs) {
    const item = document.createElement('li');
    item.dataset.run = run.name;
    // runs/latest and other links to a run: a tag on the run they point at.
    const pointers = Object.keys(links || {}).filter((link) => links[link] === run.name)
                         .map((link) => `<span class="kind">${escapeHtml(link)}</span>`).join('');
    const accuracy = run.sweep ? null : runAccuracy(run);
    item.innerHTML = run.sweep ?
        `<span class="kind">sweep</span><span>${escapeHtml(run.name)}</span>${pointers}<span class="acc">${
            run.error ? 'unreadable' : `${run.models} models · ${run.finished} done`}</span>` :
        `<input type="checkbox" title="compare with the chosen run"><span>${escapeHtml(run.name)}</span>` +
            `${pointers}<span class="acc">${run.epochs} ep${accuracy.text}</span>`;
    item.title = run.error || (accuracy ? accuracy.title : '');
    item.addEventListener('click', (e) => {
      // A sweep is a chart of its own: it is chosen, never compared, and compares with nothing.
      const compare = (e.shiftKey || e.target.type === 'checkbox') && !run.sweep &&
          !sweeps.has(runsState.chosen);
      if (compare && runsState.chosen && runsState.chosen !== run.name)
        runsState.compared = runsState.compared === run.name ? null : run.name;
      else {
        runsState.chosen = run.name;
        if (runsState.compared === run.name || run.sweep) runsState.compared = null;
      }
      refreshRuns();
    });
    list.appendChild(item);
  }
  if (!runsState.chosen && runs.length) runsState.chosen = runs[0].name;
  refreshRuns();
}
async function refreshRuns() {
  clearTimeout(runsState.timer);
  for (const item of $('runs').children) {
    item.classList.toggle('selected', item.dataset.run === runsState.chosen);
    item.classList.toggle('compared', item.dataset.run === runsState.compared);
    const box = item.querySelector('input');
    if (box) box.checked = item.dataset.run === runsState.compared;
  }
  const names = [runsState.chosen, runsState.compared].filter(Boolean);
  for (const name of names)
    runsState.data[name] = await getJson(`api/runs/${encodeURIComponent(name)}`);
  const chosen = runsState.data[runsState.chosen];
  const sweep = chosen && chosen.sweep;
  $('run-charts').hidden = sweep;
  $('sweep-view').hidden = !sweep;
  $('eval-panel').hidden = sweep;
  if (sweep) {
    $('run-title').textContent = `${chosen.name} (sweep of ${chosen.models} models)`;
    $('config-title').textContent = 'sweep.toml';
    $('run-config').textContent = chosen.sweep_toml;
    drawSweep(chosen);
  } else {
    if (chosen) {
      $('run-title').textContent =
          runsState.compared ? `${chosen.name} vs ${runsState.compared}` : chosen.name;
      $('config-title').textContent = 'Effective config';
      $('run-config').textContent = chosen.config_toml ?? '(no config.toml)';
    }
    drawCharts(names.map((name) => runsState.data[name]));
    updateEvaluation(chosen);
  }
  // A run or sweep still training gains rows: poll while the runs view is shown.
  if (!$('view-runs').hidden) runsState.timer = setTimeout(refreshRuns, 3000);
}

const RUN_COLOURS = ['#2166ac', '#b2182b'];
// Each run's curves: the running figures of the training pass, the training set evaluated after
// the epoch (only in runs with --evaluate-training-set, as LeCun 1998's Fig. 5 plots it), the
// held-out training images that choose the best epoch (runs with --validation), the test set.
// Told apart by their dashes.
const SPLITS = [
  {key: 'train', dash: [], words: 'solid: train'},
  {key: 'train_eval', dash: [2, 3], words: 'dotted: training set evaluated'},
  {key: 'validation', dash: [10, 3, 2, 3], words: 'dash-dot: held out (validation)'},
  {key: 'test', dash: [6, 4], words: 'dashed: test'},
];
// One run's curve of one split: the epochs where metrics.csv has the value.
function runCurve(run, r, split, key) {
  const column = `${split.key}_${key}`;
  return {
    name: `${run.name} ${split.key}`,
    split,
    colour: RUN_COLOURS[r],
    dash: split.dash,
    points: run.metrics.filter((m) => m[column] != null).map((m) => [m.epoch, m[column]]),
  };
}
function drawCharts(runs) {
  const series = (key) =>
      runs.flatMap((run, r) => SPLITS.map((split) => runCurve(run, r, split, key)))
          .filter((s) => s.points.length);
  drawChart($('chart-loss'), series('loss'));
  const accuracy = series('accuracy');
  drawChart($('chart-accuracy'), accuracy);
  const shown = SPLITS.filter((split) => accuracy.some((s) => s.split === split));
  $('chart-key').textContent =
      runs.map((run, r) => `${r ? 'red' : 'blue'}: ${run.name}`).join(' · ') +
      (runs.length ? ` · ${shown.map((split) => split.words).join(', ')}` : '');
}
// Tick values covering [lo, hi] in steps of 1, 2 or 5 times a power of ten, about `wanted` of
// them (whole steps when `integers`), as the run folder's curves.svg has them
// (src/pictures/svg_chart.cpp, nice_ticks); with the decimals that tell them apart.
function niceTicks(lo, hi, wanted, integers) {
  if (!(hi > lo)) return {ticks: [lo], decimals: 0};
  const rough = (hi - lo) / Math.max(wanted - 1, 1);
  let exponent = Math.floor(Math.log10(rough));
  let mantissa = [1, 2, 5].find((m) => m * 10 ** exponent >= rough * (1 - 1e-9)) || 10;
  if (integers && exponent < 0) [mantissa, exponent] = [1, 0];
  // k * mantissa scaled in one rounding, so that 3 * 0.2 reads 0.6, not 0.6000000000000001.
  const tick = (k) => exponent >= 0 ? k * mantissa * 10 ** exponent : k * mantissa / 10 ** -exponent;
  const step = tick(1), ticks = [];
  for (let k = Math.floor(lo / step + 1e-9);; k++) {
    ticks.push(tick(k));
    if (ticks[ticks.length - 1] >= hi - 1e-9 * step) break;
  }
  return {ticks, decimals: Math.max(0, Math.ceil(-Math.log10(step) - 1e-9))};
}
// Each series: points [[x, y]...], colour, dash (a line dash pattern; none: solid); a series may
// carry a band [[x, low, high]...], filled in its `fill` colour beneath every line. The y axis
// runs from one round tick to another; the x axis spans the epochs, labelled at round ones.
function drawChart(canvas, series) {
  const ctx = canvas.getContext('2d'), W = canvas.width, H = canvas.height,
        pad = {l: 50, r: 10, t: 10, b: 28};
  ctx.clearRect(0, 0, W, H);
  ctx.fillStyle = '#fff';
  ctx.fillRect(0, 0, W, H);
  const all = series.flatMap(
      (s) => s.points.concat((s.band || []).flatMap(([x, low, high]) => [[x, low], [x, high]])));
  if (!all.length) {
    canvas.dataset.bands = 0;
    canvas.dataset.series = 0;
    ctx.fillStyle = '#5b6570';
    ctx.fillText('no epochs yet', W / 2 - 30, H / 2);
    return;
  }
  const xs = all.map((p) => p[0]), ys = all.map((p) => p[1]);
  const x0 = Math.min(...xs), x1 = Math.max(...xs, x0 + 1);
  let y0 = Math.min(...ys), y1 = Math.max(...ys);
  if (y1 - y0 < 1e-9) {
    y0 -= 1;
    y1 += 1;
  }
  const yTicks = niceTicks(y0, y1, 5, false);
  [y0, y1] = [yTicks.ticks[0], yTicks.ticks[yTicks.ticks.length - 1]];
  // Epochs are whole: a tick at each round one inside the run's span.
  const xTicks = niceTicks(x0, x1, 8, true);
  xTicks.ticks = xTicks.ticks.filter((x) => x >= x0 && x <= x1);
  const X = (x) => pad.l + (x - x0) / (x1 - x0) * (W - pad.l - pad.r);
  const Y = (y) => H - pad.b - (y - y0) / (y1 - y0) * (H - pad.t - pad.b);
  ctx.strokeStyle = '#d8dde3';
  ctx.fillStyle = '#5b6570';
  ctx.font = '11px system-ui';
  ctx.lineWidth = 1;
  ctx.textBaseline = 'middle';
  ctx.textAlign = 'right';
  for (const y of yTicks.ticks) {
    ctx.beginPath();
    ctx.moveTo(pad.l, Y(y));
    ctx.lineTo(W - pad.r, Y(y));
    ctx.stroke();
    ctx.fillText(y.toFixed(yTicks.decimals), pad.l - 6, Y(y));
  }
  ctx.textBaseline = 'top';
  ctx.textAlign = 'center';
  for (const x of xTicks.ticks) {
    ctx.beginPath();
    ctx.moveTo(X(x), H - pad.b);
    ctx.lineTo(X(x), H - pad.b + 4);
    ctx.stroke();
    ctx.fillText(`${x}`, X(x), H - pad.b + 6);
  }
  ctx.textAlign = 'left';
  ctx.fillText('epoch', 4, H - pad.b + 6);  // under the y labels, clear of the first tick's
  ctx.textBaseline = 'alphabetic';
  // What the page's browser test reads: the labels as drawn.
  canvas.dataset.yTicks = yTicks.ticks.map((y) => y.toFixed(yTicks.decimals)).join(' ');
  canvas.dataset.xTicks = xTicks.ticks.join(' ');
  const banded = series.filter((s) => s.band && s.band.length);
  canvas.dataset.bands = banded.length;  // what the page's browser test counts
  canvas.dataset.series = series.length;
  for (const s of banded) {
    // Upper edge left to right, lower edge back: one closed shape per band. A band of one epoch
    // is a short bar, so that it still shows.
    const band = s.band.length > 1 ? s.band : [
      [s.band[0][0] - 0.04 * (x1 - x0), ...s.band[0].slice(1)],
      [s.band[0][0] + 0.04 * (x1 - x0), ...s.band[0].slice(1)]
    ];
    ctx.fillStyle = s.fill;
    ctx.beginPath();
    band.forEach(([x, , high], i) => (i ? ctx.lineTo(X(x), Y(high)) : ctx.moveTo(X(x), Y(high))));
    for (const [x, low] of [...band].reverse()) ctx.lineTo(X(x), Y(low));
    ctx.closePath();
    ctx.fill();
  }
  for (const s of series) {
    ctx.strokeStyle = s.colour;
    ctx.lineWidth = 2;
    ctx.setLineDash(s.dash || []);
    ctx.beginPath();
    s.points.forEach(([x, y], i) => (i ? ctx.lineTo(X(x), Y(y)) : ctx.moveTo(X(x), Y(y))));
    ctx.stroke();
    ctx.fillStyle = s.colour;
    for (const [x, y] of s.points) {
      ctx.beginPath();
      ctx.arc(X(x), Y(y), 2.5, 0, 7);
      ctx.fill();
    }
  }
  ctx.setLineDash([]);
}

// ---- a sweep: one chart of test accuracy, per setting a line for the mean over its models and a
// band from their min to their max, each setting in its own colour; its summary table below.
const SWEEP_COLOURS =
    ['#2166ac', '#b2182b', '#1b7837', '#762a83', '#e08214', '#35978f', '#8c510a', '#c51b7d'];
const BAND_ALPHA = 0.18;
function bandFill(colour) {
  const [r, g, b] = [1, 3, 5].map((i) => parseInt(colour.slice(i, i + 2), 16));
  return `rgba(${r},${g},${b},${BAND_ALPHA})`;
}
// A setting as text in HTML: its values come from a sweep.toml on disk, which anyone may edit.
const escapeHtml = (text) => text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
function drawSweep(sweep) {
  const colour = (k) => SWEEP_COLOURS[k % SWEEP_COLOURS.length];
  const series = sweep.settings.map((s, k) => ({
    name: s.setting,
    colour: colour(k),
    fill: bandFill(colour(k)),
    points: s.test_accuracy.map((e) => [e.epoch, e.mean]),
    band: s.test_accuracy.map((e) => [e.epoch, e.min, e.max]),
  }));
  drawChart($('chart-sweep'), series);
  const legend = $('sweep-legend');
  legend.textContent = '';
  sweep.settings.forEach((s, k) => {
    const item = document.createElement('li');
    item.innerHTML =
        `<span class="swatch" style="background:${bandFill(colour(k))}"><i style="background:${
            colour(k)}"></i></span>${escapeHtml(s.setting)} <span class="hint">(${
            s.runs.length} model${s.runs.length === 1 ? '' : 's'})</span>`;
    legend.appendChild(item);
  });
  const trained = sweep.settings.reduce((n, s) => n + s.runs.length, 0);
  $('sweep-key').textContent = sweep.settings.length ?
      `Line: the mean over a setting's models; band: their min to max. ${trained} of ${
          sweep.models} models have trained an epoch; an epoch counts the models that reached it.` :
      'No model of this sweep has trained an epoch yet.';
  drawSweepSummary(sweep);
}
// As `lenet5 sweep` prints it: over the models that finished all their epochs, evaluated.
function drawSweepSummary(sweep) {
  const table = $('sweep-summary');
  table.innerHTML = '<tr><th>setting</th><th>models</th><th>mean ± sd</th><th>min</th>' +
      '<th>max</th><th>time to 99 %</th></tr>';
  for (const s of sweep.settings) {
    const row = document.createElement('tr'), m = s.summary;
    if (!m) {
      row.innerHTML =
          `<td>${escapeHtml(s.setting)}</td><td>0</td><td colspan="4">no model finished yet</td>`;
    } else {
      const a = m.final_test_accuracy;
      const time = m.reached_99 ? `epoch ${m.epoch_to_99.toFixed(1)}, ${
                                      m.seconds_to_99.toFixed(2)} s (${m.reached_99}/${m.models})` :
                                  'not reached';
      const cells = [m.models, `${a.mean.toFixed(2)} ± ${a.sd.toFixed(2)}`, a.min.toFixed(2),
                     a.max.toFixed(2), time];
      row.innerHTML = `<td>${escapeHtml(s.setting)}</td>` + cells.map((c) => `<td>${c}</td>`).join('');
    }
    table.appendChild(row);
  }
}

// ---- the chosen run's checkpoint on the test set: the confusion matrix as a heat map, and a
// gallery of the images it misreads (most confident first, as the server sends them), named as
// the run's data set names its classes. Fetched again only when the run's checkpoint changes (its
// stamp in /api/runs/NAME).
const CELL = 34, MARGIN = 32;  // the heat map's cells and its top margin, canvas pixels
const evaluation = {
  key: null,      // run and checkpoint stamp shown
  loading: null,  // ... being fetched
  data: null,
  cell: null,     // [true, read]: the gallery shows only those misreads
  left: MARGIN    // the heat map's left margin: wide enough for its row labels
};

// How the evaluation's data set names things: class k ("7", "Sandal"); the heat map's row k,
// "3 Dress" where class 3 is not named "3" (as evaluate --report's confusion.png: the columns
// keep the numbers, so that ten long names need not fit above cells 34 pixels wide); and what
// one misread test image is, "digit" for MNIST, whose noun names both, else "image".
const evalClass = (d, k) => d.classes?.[k] ?? String(k);
const rowLabel = (d, k) => numberedClasses(d.classes) ? String(k) : `${k} ${evalClass(d, k)}`;
const classNoun = (d) => d.class_noun ?? 'digit';
const imageNoun = (d) => numberedClasses(d.classes) ? classNoun(d) : 'image';
function updateEvaluation(run) {
  if (!run) return;
  if (!run.checkpoint) {
    evaluation.key = null;
    showEvaluationMessage('No checkpoint yet: the run is evaluated once its first epoch ends.');
    return;
  }
  const key = `${run.name}\n${run.checkpoint.stamp}`;
  if (key === evaluation.key || key === evaluation.loading) return;
  if (!evaluation.key || !evaluation.key.startsWith(`${run.name}\n`))
    showEvaluationMessage(`Evaluating ${run.checkpoint.file} on the test set…`);
  evaluation.loading = key;
  getJson(`api/runs/${encodeURIComponent(run.name)}/evaluation`)
      .then((data) => {
        if (evaluation.loading !== key) return;  // another run was chosen meanwhile
        if (!evaluation.key || evaluation.key.split('\n')[0] !== run.name) evaluation.cell = null;
        evaluation.key = key;
        evaluation.data = data;
        showEvaluation();
      })
      .catch((e) => {
        // Not remembered as shown: the next poll asks again (the test set fetched meanwhile).
        if (evaluation.loading === key) showEvaluationMessage(e.message);
      })
      .finally(() => {
        if (evaluation.loading === key) evaluation.loading = null;
      });
}
function showEvaluationMessage(message) {
  $('eval-title').textContent = 'Test set';
  $('eval').hidden = true;
  $('eval-message').hidden = false;
  $('eval-message').textContent = message;
}
function showEvaluation() {
  const d = evaluation.data;
  $('eval-message').hidden = true;
  $('eval').hidden = false;
  $('eval-title').textContent = `${evaluation.key.split('\n')[0]}, ${d.checkpoint} (epoch ${
      d.epoch}) on the ${d.dataset_title} test set: ${
      (100 * d.accuracy).toFixed(2)}% (${d.correct}/${d.images}), loss ${d.mean_loss.toFixed(4)}, ${
      d.misreads_total} misread`;
  const noun = classNoun(d);
  $('confusion-key').textContent = `Rows: the true ${noun}; columns: the ${noun} read; shaded by ` +
      'log(1\u00a0+\u00a0count). Click a cell to show only those misreads, click it again for all.';
  $('gallery-title').textContent = `Misread ${imageNoun(d)}s`;
  drawConfusion();
  drawGallery();
}

function drawConfusion() {
  const canvas = $('confusion'), ctx = canvas.getContext('2d'), d = evaluation.data;
  const counts = d.confusion, largest = Math.max(1, ...counts.flat()), scale = Math.log1p(largest);
  ctx.font = '11px system-ui';
  const widest = Math.max(...counts.map((_, k) => ctx.measureText(rowLabel(d, k)).width));
  const left = evaluation.left = Math.max(MARGIN, Math.ceil(widest) + 22);  // "← true" beside
  canvas.width = left + 10 * CELL;  // resets the context: its settings follow
  canvas.height = MARGIN + 10 * CELL;
  ctx.fillStyle = '#fff';
  ctx.fillRect(0, 0, canvas.width, canvas.height);
  ctx.font = '11px system-ui';
  ctx.textAlign = 'center';
  ctx.textBaseline = 'middle';
  ctx.fillStyle = '#5b6570';
  ctx.fillText('read →', left + 5 * CELL, 8);
  ctx.save();
  ctx.translate(8, MARGIN + 5 * CELL);
  ctx.rotate(-Math.PI / 2);
  ctx.fillText('← true', 0, 0);
  ctx.restore();
  ctx.fillStyle = '#1b1f24';
  for (let k = 0; k < 10; k++) ctx.fillText(k, left + k * CELL + CELL / 2, MARGIN - 9);
  ctx.textAlign = 'right';
  for (let k = 0; k < 10; k++) ctx.fillText(rowLabel(d, k), left - 5, MARGIN + k * CELL + CELL / 2);
  ctx.textAlign = 'center';
  for (let t = 0; t < 10; t++)
    for (let p = 0; p < 10; p++) {
      // log(1 + count), as confusion.png: a dozen confusions still show beside a thousand reads.
      const shade = Math.log1p(counts[t][p]) / scale, [r, g, b] = diverging(0.5 + 0.5 * shade);
      const x = left + p * CELL, y = MARGIN + t * CELL;
      ctx.fillStyle = `rgb(${r},${g},${b})`;
      ctx.fillRect(x, y, CELL, CELL);
      ctx.strokeStyle = '#d8dde3';
      ctx.strokeRect(x + 0.5, y + 0.5, CELL, CELL);
      if (counts[t][p]) {
        ctx.fillStyle = shade > 0.6 ? '#fff' : '#1b1f24';
        ctx.fillText(counts[t][p], x + CELL / 2, y + CELL / 2 + 1);
      }
    }
  if (evaluation.cell) {
    const [t, p] = evaluation.cell;
    ctx.strokeStyle = '#2166ac';
    ctx.lineWidth = 3;
    ctx.strokeRect(left + p * CELL + 1.5, MARGIN + t * CELL + 1.5, CELL - 2, CELL - 2);
    ctx.lineWidth = 1;
  }
}
// The cell [true, read] under a mouse event, or null.
function heatMapCell(event) {
  const canvas = $('confusion'), box = canvas.getBoundingClientRect();
  const x = (event.clientX - box.left) * canvas.width / box.width - evaluation.left;
  const y = (event.clientY - box.top) * canvas.height / box.height - MARGIN;
  const p = Math.floor(x / CELL), t = Math.floor(y / CELL);
  return evaluation.data && t >= 0 && t <= 9 && p >= 0 && p <= 9 ? [t, p] : null;
}
// The off-diagonal cell with misreads under a mouse event, or null.
function confusionCell(event) {
  const cell = heatMapCell(event);
  return cell && cell[0] !== cell[1] && evaluation.data.confusion[cell[0]][cell[1]] ? cell : null;
}
// The cell's classes by name in its tooltip: the columns are headed by numbers only.
$('confusion').addEventListener('mousemove', (e) => {
  const canvas = $('confusion'), cell = heatMapCell(e), d = evaluation.data;
  if (!d) return;
  canvas.style.cursor = confusionCell(e) ? 'pointer' : 'default';
  canvas.title = cell ? `true ${evalClass(d, cell[0])}, read as ${evalClass(d, cell[1])}: ${
                            d.confusion[cell[0]][cell[1]]}` :
                        `rows: the true ${classNoun(d)}; columns: the ${classNoun(d)} read`;
});
$('confusion').addEventListener('click', (e) => {
  const cell = confusionCell(e), same = cell && evaluation.cell && cell.join() === evaluation.cell.join();
  evaluation.cell = cell && !same ? cell : null;
  drawConfusion();
  drawGallery();
});

function drawGallery() {
  const d = evaluation.data, cell = evaluation.cell;
  const shown = cell ? d.misreads.filter((m) => m.truth === cell[0] && m.predicted === cell[1]) :
                       d.misreads;
  const sent = d.misreads.length, partial = sent < d.misreads_total;
  let key;
  if (cell) {
    const count = d.confusion[cell[0]][cell[1]];
    key = `${evalClass(d, cell[0])} read as ${evalClass(d, cell[1])}: ${count} in the test set` +
        (shown.length < count ? `, ${shown.length} of them among the ${sent} most confident misreads sent` : '') +
        '. Click the cell again for every misread.';
  } else {
    key = `${d.misreads_total} misread test ${imageNoun(d)}s, the most confident first` +
        (partial ? ` (the ${sent} most confident shown)` : '') +
        `; true → read, and the probability of the ${classNoun(d)} read.`;
  }
  $('gallery-key').textContent = key;
  const gallery = $('gallery'), named = !numberedClasses(d.classes);
  gallery.textContent = '';
  gallery.classList.toggle('named', named);  // wider captions, on two lines
  for (const m of shown) {
    const figure = document.createElement('figure'), canvas = document.createElement('canvas');
    canvas.width = canvas.height = 28;
    const ctx = canvas.getContext('2d'), image = ctx.createImageData(28, 28), ink = atob(m.pixels);
    for (let i = 0; i < 784; i++) {
      const v = 255 - ink.charCodeAt(i);  // dark ink on white, as errors.png
      image.data.set([v, v, v, 255], 4 * i);
    }
    ctx.putImageData(image, 0, 0);
    const truth = evalClass(d, m.truth), read = evalClass(d, m.predicted),
          percent = `${Math.round(100 * m.probability)}%`;
    figure.title = `test image ${m.index}: true ${truth}, read as ${read} ${percent}`;
    figure.appendChild(canvas);
    // "7 → 2 93%"; with named classes "Sandal" over "→ Sneaker 87%".
    figure.insertAdjacentHTML('beforeend', `<figcaption>${escapeHtml(truth)}${named ? '<br>' : ''} → ${
        escapeHtml(read)} <span>${percent}</span></figcaption>`);
    gallery.appendChild(figure);
  }
}
