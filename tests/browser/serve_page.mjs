// Drives the page of `lenet5 serve` in headless chromium (puppeteer-core, no browser download):
// draws a 7 with mouse events, then checks what a person would see. Usage: node serve_page.mjs URL DIR
import { createRequire } from 'module';
import { writeFileSync } from 'fs';

const require = createRequire(process.env.NODE_PATH + '/');
const puppeteer = require('puppeteer-core');
const [url, dir] = process.argv.slice(2);
const failures = [];
const check = (ok, what) => { console.log(`${ok ? 'ok  ' : 'FAIL'} ${what}`); if (!ok) failures.push(what); };
// A chart's tick labels (the canvas's data-y-ticks, data-x-ticks: the labels as drawn) are round:
// at least three, evenly spaced, the step 1, 2 or 5 times a power of ten.
const roundTicks = (labels) => {
  const values = labels.split(' ').map(Number), step = values[1] - values[0];
  const mantissa = step / 10 ** Math.floor(Math.log10(step) + 1e-9);
  return values.length >= 3 && [1, 2, 5].some((m) => Math.abs(mantissa - m) < 1e-6) &&
    values.every((v, i) => Math.abs(v - values[0] - i * step) < 1e-6 * step);
};

const browser = await puppeteer.launch({
  executablePath: process.env.LENET5_CHROMIUM, headless: 'new',
  args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
});
try {
  const page = await browser.newPage();
  await page.setViewport({ width: 1280, height: 1100 });
  const errors = [];
  page.on('pageerror', (e) => errors.push(e.message));
  // The page's own files, its icon included, are all there (the API's 404s are answers).
  const missingFiles = [];
  page.on('response', (r) => {
    if (r.status() === 404 && !new URL(r.url()).pathname.startsWith('/api/')) missingFiles.push(r.url());
  });
  await page.goto(url, { waitUntil: 'networkidle0' });
  await page.waitForFunction(() => document.querySelectorAll('#filters-c3 canvas').length > 0);

  // A 7: the top bar left to right, then the stroke down to the bottom left.
  const box = await (await page.$('#pad')).boundingBox();
  const at = (x, y) => [box.x + x * box.width, box.y + y * box.height];
  const path = [[0.28, 0.22], [0.72, 0.22], [0.6, 0.45], [0.5, 0.65], [0.42, 0.82]];
  await page.mouse.move(...at(...path[0]));
  await page.mouse.down();
  for (let i = 1; i < path.length; i++)
    for (let s = 1; s <= 8; s++) {
      const [x0, y0] = path[i - 1], [x1, y1] = path[i];
      await page.mouse.move(...at(x0 + (x1 - x0) * s / 8, y0 + (y1 - y0) * s / 8));
    }
  await page.mouse.up();
  await page.waitForFunction(() => document.querySelectorAll('#layers canvas').length > 0);
  // Every request of the stroke answered and drawn: each answer repaints the layers' canvases,
  // so checking before the last one lands would look at an earlier part of the stroke. On a busy
  // machine the answers come late; no request for half a second means none is left.
  await page.waitForNetworkIdle({ idleTime: 500, timeout: 60000 });
  await new Promise((r) => setTimeout(r, 100));  // the last answer's drawing
  const prediction = await page.$eval('#prediction', (e) => e.textContent.trim());
  check(prediction === '7', `the drawn 7 is read as 7 (shown: ${prediction})`);

  // Every layer's canvases are drawn: each holds more than one colour, unless the answer's values
  // for that map are all the same (a map the ReLU silenced for this digit, marked by the page);
  // and each layer has at least one map with more than one colour.
  const layers = await page.$$eval('#layers .layer', (rows) => rows.map((row) => ({
    name: row.dataset.layer,
    canvases: [...row.querySelectorAll('canvas')].map((c) => {
      const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
      const colours = new Set();
      for (let i = 0; i < d.length; i += 4) colours.add((d[i] << 16) | (d[i + 1] << 8) | d[i + 2]);
      return {colours: colours.size, uniform: c.dataset.uniform === 'true'};
    }),
  })));
  check(layers.map((l) => l.name).join(',') === 'c1,s2,c3,s4,c5,f6,output',
    `a row per layer (${layers.map((l) => l.name)})`);
  for (const layer of layers) {
    const drawn = layer.canvases.filter((c) => c.colours >= 2).length;
    const uniform = layer.canvases.filter((c) => c.colours < 2 && c.uniform).length;
    const blank = layer.canvases.length - drawn - uniform;
    check(drawn > 0 && blank === 0,
          `${layer.name}: ${layer.canvases.length} maps, ${drawn} drawn, ${uniform} uniform in ` +
          `the answer, ${blank} blank otherwise`);
  }
  // Hovering C3 map 0 outlines the S2 maps its table row names.
  await page.hover('[data-layer="c3"] canvas[data-map="0"]');
  const fed = await page.$$eval('[data-layer="s2"] canvas.feeds', (c) => c.length);
  const expected = await page.evaluate(() => fetch('api/model').then((r) => r.json())
    .then((m) => m.c3.table[0].filter(Boolean).length));
  check(fed === expected, `hovering C3 map 0 outlines the ${expected} S2 maps that feed it (${fed})`);
  await page.screenshot({ path: `${dir}/draw.png`, fullPage: true });
  // The drawing as the page posts it (the pad's PNG): scripts/serve_bench.py --page-drawing.
  const drawn = await page.evaluate(() => new Promise((resolve) => document.getElementById('pad').toBlob((blob) => {
    const reader = new FileReader();
    reader.onload = () => resolve(reader.result.split(',')[1]);
    reader.readAsDataURL(blob);
  }, 'image/png')));
  writeFileSync(`${dir}/drawn-7.png`, Buffer.from(drawn, 'base64'));

  await page.click('#tab-runs');
  await page.waitForFunction(() => document.querySelector('#runs li.selected'));
  await new Promise((r) => setTimeout(r, 300));
  const curve = await page.$eval('#chart-accuracy', (c) => {
    const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
    let coloured = 0;  // pixels of the series' colours, not grey grid or white
    for (let i = 0; i < d.length; i += 4) if (Math.abs(d[i] - d[i + 2]) > 60) coloured++;
    return coloured;
  });
  check(curve > 50, `the runs view draws an accuracy curve (${curve} coloured pixels)`);
  // The run evaluated its training set after each epoch (--evaluate-training-set) and the 5,000
  // training images it held out (--validation's default): a dotted and a dash-dot curve beside
  // the running training accuracy and the test accuracy, each named in the key.
  const drawnSeries = await page.$eval('#chart-accuracy', (c) => Number(c.dataset.series));
  const key = await page.$eval('#chart-key', (e) => e.textContent);
  check(drawnSeries === 4 && key.includes('dotted: training set evaluated') &&
            key.includes('dash-dot: held out (validation)'),
        `the accuracy chart has the training set's evaluated and the held-out curves (${drawnSeries} curves; key: ${key})`);
  // Round values on the y axes (0.2 0.4 0.6, not 0.3369 0.4513), and a tick at each of the run's
  // two epochs on the x axes.
  const ticks = await page.evaluate(() => ['chart-loss', 'chart-accuracy'].map((id) => ({
    id, y: document.getElementById(id).dataset.yTicks, x: document.getElementById(id).dataset.xTicks,
  })));
  for (const t of ticks) {
    check(roundTicks(t.y), `${t.id}: the y axis is labelled at round values (${t.y})`);
    check(t.x === '1 2', `${t.id}: the x axis is labelled at each epoch (${t.x})`);
  }

  // The run's checkpoint on the test set: the heat map is drawn (cells of several shades of the
  // white-to-red map, not only white), the gallery shows misread digits with their labels, and a
  // click on a confusion cell keeps only that pair's misreads; a second click shows all again.
  // The first evaluation of the run's 10,000 test images takes a second or more on a busy machine.
  await page.waitForFunction(() => !document.querySelector('#eval').hidden || (() => {
    const m = document.querySelector('#eval-message');
    return !m.hidden && !m.textContent.startsWith('Evaluating');
  })(), { timeout: 60000 });
  const evalMessage = await page.$eval('#eval-message', (e) => e.hidden ? '' : e.textContent);
  check(evalMessage === '', `the evaluation is shown (${evalMessage || 'no message'})`);
  const evaluated = await page.evaluate(() => fetch('api/runs/short/evaluation').then((r) => r.json()));
  // The list names the checkpoint its accuracy is of: the one evaluated here, with its epoch. The
  // accuracy is the one the trainer recorded in it; the evaluation's may differ by a few of the
  // 10,000 images (another engine's batches sum in another order and can flip a near tie): 0.1%.
  const listed = await page.$eval('#runs li[data-run="short"] .acc', (e) => e.textContent);
  const [, listedAccuracy, listedEpoch] = listed.match(/best ([0-9.]+)% \(ep ([0-9]+)\)/) || [];
  check(evaluated.checkpoint === 'best.safetensors' && Number(listedEpoch) === evaluated.epoch &&
      Math.abs(Number(listedAccuracy) - 100 * evaluated.accuracy) <= 0.1,
    `the runs list gives the evaluated checkpoint's accuracy and epoch (${listed}; evaluation: ` +
    `${evaluated.checkpoint}, epoch ${evaluated.epoch}, ${(100 * evaluated.accuracy).toFixed(2)}%)`);
  // Each cell's colour, read inside the cell away from its count: white where the count is 0, a
  // shade of red elsewhere, never lighter for the larger of two counts (log(1 + count) shading).
  const cells = await page.$eval('#confusion', (c) => {
    const ctx = c.getContext('2d'), colours = [];
    for (let t = 0; t < 10; t++)
      for (let p = 0; p < 10; p++) colours.push([...ctx.getImageData(32 + 34 * p + 4, 32 + 34 * t + 4, 1, 1).data]);
    return colours;
  });
  const counts = evaluated.confusion.flat(), lightness = (rgb) => rgb[0] + rgb[1] + rgb[2];
  const whiteWhereZero = counts.every((n, i) => (n === 0) === (lightness(cells[i]) === 3 * 247));
  const darkerWhereMore = counts.every((n, i) => counts.every((m, j) =>
    n >= m || lightness(cells[i]) >= lightness(cells[j])));  // close counts may share a colour
  check(whiteWhereZero && darkerWhereMore,
    `the confusion heat map is drawn: white where a count is 0, darker where it is larger`);
  const gallery = await page.$$eval('#gallery figure', (figures) => figures.map((f) => {
    const c = f.querySelector('canvas'), d = c.getContext('2d').getImageData(0, 0, 28, 28).data;
    const greys = new Set();
    for (let i = 0; i < d.length; i += 4) greys.add(d[i]);
    return { caption: f.querySelector('figcaption').textContent, greys: greys.size };
  }));
  check(gallery.length === evaluated.misreads.length && gallery.every((g) => g.greys > 2),
    `the gallery shows the ${evaluated.misreads.length} misreads sent, each drawn (${gallery.length})`);
  const first = evaluated.misreads[0];
  check(gallery.length > 0 && gallery[0].caption.startsWith(`${first.truth} → ${first.predicted}`),
    `the first misread is the most confident (${gallery[0]?.caption})`);
  // The off-diagonal cell with the most confusions, clicked at its centre.
  let cell = [0, 1];
  evaluated.confusion.forEach((row, t) => row.forEach((n, p) => {
    if (t !== p && n > evaluated.confusion[cell[0]][cell[1]]) cell = [t, p];
  }));
  await page.$eval('#confusion', (c) => c.scrollIntoView({ block: 'center' }));
  const heatBox = await (await page.$('#confusion')).boundingBox();  // in the viewport, scrolled
  const cellAt = ([t, p]) => [heatBox.x + (32 + 34 * p + 17) * heatBox.width / 372,
                              heatBox.y + (32 + 34 * t + 17) * heatBox.height / 372];
  await page.mouse.click(...cellAt(cell));
  const filtered = await page.$$eval('#gallery figcaption', (f) => f.map((e) => e.textContent));
  const pair = `${cell[0]} → ${cell[1]}`;
  const inCell = evaluated.misreads.filter((m) => m.truth === cell[0] && m.predicted === cell[1]);
  check(filtered.length === inCell.length && filtered.every((c) => c.startsWith(pair)),
    `clicking cell ${pair} keeps its ${inCell.length} misreads (${filtered.length} shown)`);
  await page.screenshot({ path: `${dir}/runs-filtered.png`, fullPage: true });
  await page.mouse.click(...cellAt(cell));
  const all = await page.$$eval('#gallery figure', (f) => f.length);
  check(all === evaluated.misreads.length, `clicking it again shows every misread (${all})`);
  await page.screenshot({ path: `${dir}/runs.png`, fullPage: true });

  // A Fashion-MNIST run: the heat map's rows are headed by the class names (a wider left margin
  // than the digits' 32 pixels), the gallery's captions and keys name its classes, not numbers.
  await page.click('#runs li[data-run="wardrobe"]');
  await page.waitForFunction(() => !document.querySelector('#eval').hidden &&
    document.querySelector('#eval-title').textContent.startsWith('wardrobe,'), { timeout: 60000 });
  const fashion = await page.evaluate(() => fetch('api/runs/wardrobe/evaluation').then((r) => r.json()));
  const fashionView = await page.evaluate(() => ({
    width: document.querySelector('#confusion').width,
    title: document.querySelector('#eval-title').textContent,
    key: document.querySelector('#confusion-key').textContent,
    gallery: document.querySelector('#gallery-title').textContent,
    captions: [...document.querySelectorAll('#gallery figcaption')].map((f) => f.textContent),
  }));
  check(fashion.dataset === 'fashion-mnist' && fashion.classes[0] === 'T-shirt/top',
    `a Fashion-MNIST run's evaluation names its data set and classes (${fashion.dataset_title})`);
  check(fashionView.width > 372 + 40 && fashionView.title.includes('on the Fashion-MNIST test set'),
    `its heat map leaves room for the class names (${fashionView.width} px wide): ${fashionView.title}`);
  check(fashionView.key.startsWith('Rows: the true class; columns: the class read') &&
        fashionView.gallery === 'Misread images', `its keys speak of classes (${fashionView.gallery})`);
  const firstWorn = fashion.misreads[0];
  check(fashionView.captions.length === fashion.misreads.length && fashionView.captions[0] ===
        `${fashion.classes[firstWorn.truth]} → ${fashion.classes[firstWorn.predicted]} ${
          Math.round(100 * firstWorn.probability)}%`,
    `its misreads are captioned by class name (${fashionView.captions[0]})`);
  await page.$eval('#eval-panel', (p) => p.scrollIntoView());
  await page.screenshot({ path: `${dir}/runs-fashion.png`, fullPage: true });

  // A sweep: one chart, per setting a mean line and a min..max band in the setting's colour (both
  // found among the canvas's pixels: the band's fill over white, the line's own colour), a legend
  // entry naming it, and a row of the summary table; the run's charts and test set are hidden.
  await page.click('#runs li[data-run="sweep-a"]');
  await page.waitForFunction(() => !document.querySelector('#sweep-view').hidden &&
    document.querySelectorAll('#sweep-legend li').length > 0);
  const sweep = await page.evaluate(() => fetch('api/runs/sweep-a').then((r) => r.json()));
  const drawnSweep = await page.$eval('#chart-sweep', (c) => {
    const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data, colours = new Map();
    for (let i = 0; i < d.length; i += 4) {
      const key = `${d[i]},${d[i + 1]},${d[i + 2]}`;
      colours.set(key, (colours.get(key) || 0) + 1);
    }
    return {bands: Number(c.dataset.bands), colours: [...colours]};
  });
  const sweepView = await page.evaluate(() => ({
    legend: [...document.querySelectorAll('#sweep-legend li')].map((li) => ({
      text: li.textContent, line: getComputedStyle(li.querySelector('.swatch i')).backgroundColor,
      band: getComputedStyle(li.querySelector('.swatch')).backgroundColor,
    })),
    rows: document.querySelectorAll('#sweep-summary tr').length - 1,
    runCharts: document.querySelector('#run-charts').hidden,
    testSet: document.querySelector('#eval-panel').hidden,
  }));
  const settings = sweep.settings.map((s) => s.setting);
  check(settings.join() === 'lr=0.02,lr=0.1', `the sweep has two settings (${settings})`);
  check(drawnSweep.bands === settings.length, `one band per setting drawn (${drawnSweep.bands})`);
  check(sweepView.legend.length === settings.length &&
        sweepView.legend.every((l, k) => l.text.startsWith(settings[k])),
    `a legend entry per setting, naming it (${sweepView.legend.map((l) => l.text).join('; ')})`);
  // Pixels within 3 of a colour: the canvas's antialiasing and the band's alpha rounding.
  const pixelsNear = (rgb) => drawnSweep.colours.filter(([key]) =>
    key.split(',').every((v, i) => Math.abs(Number(v) - rgb[i]) <= 3)).reduce((n, [, c]) => n + c, 0);
  const rgbOf = (css) => css.match(/[\d.]+/g).map(Number);
  for (const [k, l] of sweepView.legend.entries()) {
    const [r, g, b, a] = rgbOf(l.band), overWhite = [r, g, b].map((v) => v * a + 255 * (1 - a));
    const band = pixelsNear(overWhite), line = pixelsNear(rgbOf(l.line));
    check(band > 20 && line > 20, `${settings[k]}: its band (${band} pixels) and mean line (${line}) are drawn`);
  }
  check(sweepView.rows === settings.length, `a summary row per setting (${sweepView.rows})`);
  const sweepTicks = await page.$eval('#chart-sweep', (c) => ({ y: c.dataset.yTicks, x: c.dataset.xTicks }));
  check(roundTicks(sweepTicks.y) && sweepTicks.x === '1 2 3',
    `the sweep's chart is labelled at round values and at its three epochs (y ${sweepTicks.y}; x ${sweepTicks.x})`);
  check(sweepView.runCharts && sweepView.testSet, 'the run charts and the test set are hidden');
  await page.$eval('#view-runs', (v) => v.scrollIntoView());
  await page.screenshot({ path: `${dir}/sweep.png`, fullPage: true });
  await page.click('#runs li[data-run="short"]');
  await page.waitForFunction(() => !document.querySelector('#run-charts').hidden);
  check(await page.$eval('#sweep-view', (v) => v.hidden), 'choosing a run again shows its charts');

  // The icon the page names in its head is served.
  const icon = await page.evaluate(() => {
    const link = document.querySelector('link[rel="icon"]');
    return link ? fetch(link.href).then((r) => ({ status: r.status, type: r.headers.get('Content-Type') }))
                : { status: 'no <link rel="icon">' };
  });
  check(icon.status === 200 && icon.type === 'image/svg+xml', `the page's icon is served (${icon.status}, ${icon.type})`);
  check(missingFiles.length === 0, `no file the page asked for was missing (${missingFiles.join(', ')})`);

  // A phone, 360 px wide: the header is one line (the name, the tabs and the model's line, cut to
  // what is left, side by side) and nothing in it runs past the screen's edge. 60 px: one line of
  // the tabs' height with the header's padding, where a wrapped header takes two or more.
  await page.setViewport({ width: 360, height: 740, deviceScaleFactor: 2 });
  await page.click('#tab-draw');
  const header = await page.evaluate(() => {
    const box = (q) => document.querySelector(q).getBoundingClientRect();
    const middle = (q) => (box(q).top + box(q).bottom) / 2;
    const h = document.querySelector('header');
    return { height: box('header').height, middles: ['h1', 'nav', '#model-info'].map(middle),
             infoRight: box('#model-info').right, overflow: h.scrollWidth - h.clientWidth };
  });
  const oneLine = Math.max(...header.middles) - Math.min(...header.middles) < 6;
  check(header.height <= 60 && oneLine && header.infoRight <= 360 && header.overflow <= 0,
    `at 360 px the header is one line: ${header.height.toFixed(0)} px high, the name, the tabs and ` +
    `the model's line centred at ${header.middles.map((m) => m.toFixed(0)).join(', ')} px, the ` +
    `model's line ending at ${header.infoRight.toFixed(0)} px, ${header.overflow} px past the edge`);
  // Neither view is wider than the phone: what is wider (C3's 16 filters) scrolls in its panel.
  // The page's width, and its widest element (tag, id or class, parent's): where to look when it
  // is too wide.
  const pageWidth = () => page.evaluate(() => {
    const shown = [...document.querySelectorAll('body *')].filter((e) => e.getClientRects().length);
    const widest = shown.reduce((a, e) => e.getBoundingClientRect().right > a.getBoundingClientRect().right ? e : a);
    const name = (e) => `${e.tagName.toLowerCase()}${e.id ? '#' + e.id : ''}${e.className ? '.' + e.className : ''}`;
    return `${document.documentElement.scrollWidth} px (widest: ${name(widest)} in ${name(widest.parentElement)})`;
  });
  const drawWidth = await pageWidth();
  await page.screenshot({ path: `${dir}/phone.png` });
  await page.click('#tab-runs');
  await page.waitForFunction(() => !document.querySelector('#run-charts').hidden);
  const runsWidth = await pageWidth();
  check(parseInt(drawWidth) <= 360 && parseInt(runsWidth) <= 360,
    `at 360 px the page needs no sideways scrolling (draw view ${drawWidth}, runs view ${runsWidth})`);
  await page.screenshot({ path: `${dir}/phone-runs.png`, fullPage: true });
  await page.setViewport({ width: 1280, height: 1100 });

  // When the server cannot evaluate (here its answer when the test set is missing, stood in for
  // by the browser), the page shows the server's message in place of the heat map and gallery.
  const missing = 'MNIST not found in data/mnist: run scripts/fetch_mnist.sh or pass --data DIR';
  await page.setRequestInterception(true);
  page.on('request', (request) => request.url().endsWith('/evaluation')
    ? request.respond({ status: 503, contentType: 'application/json', body: JSON.stringify({ error: missing }) })
    : request.continue());
  await page.reload({ waitUntil: 'networkidle0' });
  await page.click('#tab-runs');
  await page.waitForFunction(() => !document.querySelector('#eval-message').hidden &&
    !document.querySelector('#eval-message').textContent.startsWith('Evaluating'), { timeout: 30000 });
  const shown = await page.evaluate(() => ({
    message: document.querySelector('#eval-message').textContent,
    view: getComputedStyle(document.querySelector('#eval')).display,
  }));
  check(shown.message === missing && shown.view === 'none',
    `without the test set the server's message replaces the view (${shown.message}; view ${shown.view})`);
  check(errors.length === 0, `no script errors (${errors.join('; ')})`);
} finally {
  await browser.close();
}
console.log(`screenshots: ${dir}/draw.png, ${dir}/runs.png, ${dir}/runs-filtered.png, ${dir}/runs-fashion.png, ${dir}/sweep.png, ${dir}/phone.png, ${dir}/phone-runs.png`);
process.exit(failures.length ? 1 : 0);
