// Frame rate of `lenet5 serve`'s page while a digit is being drawn: headless chromium (the browser
// test's puppeteer-core and Debian chromium) draws loops on the pad with mouse events at a high
// rate (one every 4 ms) for a few seconds while the classify answers come back, and the page records the time of
// every animation frame (requestAnimationFrame) and every task that held the main thread over
// 50 ms (PerformanceObserver 'longtask'). Prints the frame intervals while drawing (median, 95th
// percentile, largest), the share of frames later than 1/60 s and of those that missed at least
// one 60 Hz frame (over 1.5/60 s), the requests answered, and the same intervals with the page
// idle as the baseline of this browser and machine.
//
//   lenet5 serve --checkpoint F --port 8080 &
//   NODE_PATH=build/web-test/node_modules node scripts/page_fps.mjs http://127.0.0.1:8080/ \
//       [--seconds 4] [--interval-ms 4] [--json]
//
// Chromium: $LENET5_CHROMIUM, else /usr/bin/chromium. Headless chromium paints as a browser on a
// 60 Hz display does (one frame every 16.7 ms when nothing is late), so the intervals measure the
// page's own work; the server answers on the same machine, so its CPU time competes too.
import { createRequire } from 'module';
import { resolve } from 'path';

const require = createRequire(process.env.NODE_PATH ? resolve(process.env.NODE_PATH) + '/' : import.meta.url);
const puppeteer = require('puppeteer-core');

function options(argv) {
  const o = { url: null, seconds: 4, intervalMs: 4, json: false };
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--seconds') o.seconds = Number(argv[++i]);
    else if (argv[i] === '--interval-ms') o.intervalMs = Number(argv[++i]);
    else if (argv[i] === '--json') o.json = true;
    else o.url = argv[i];
  }
  if (!o.url) {
    console.error('usage: node scripts/page_fps.mjs URL [--seconds 4] [--interval-ms 4] [--json]');
    process.exit(2);
  }
  return o;
}

// Records every animation frame's timestamp and every long task, from the page's first script on.
function recordFrames() {
  window.__frames = [];
  window.__longTasks = [];
  window.__pointerMoves = 0;  // as the page's handlers see them (Chromium coalesces to one a frame)
  document.addEventListener('pointermove', () => window.__pointerMoves++, true);
  const tick = (t) => {
    window.__frames.push(t);
    requestAnimationFrame(tick);
  };
  requestAnimationFrame(tick);
  new PerformanceObserver((list) => {
    for (const e of list.getEntries()) window.__longTasks.push([e.startTime, e.duration]);
  }).observe({ type: 'longtask', buffered: true });
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function summary(frames) {
  const intervals = frames.slice(1).map((t, i) => t - frames[i]).sort((a, b) => a - b);
  const n = intervals.length, at = (q) => intervals[Math.min(n - 1, Math.floor(q * n))];
  const share = (limit) => intervals.filter((d) => d > limit).length / Math.max(n, 1);
  return {
    frames: n,
    fps: n ? 1000 * n / (frames[frames.length - 1] - frames[0]) : 0,
    median_ms: at(0.5),
    p95_ms: at(0.95),
    max_ms: intervals[n - 1],
    over_1_60_s: share(1000 / 60 + 0.5),  // 0.5 ms: the timestamps' jitter around 16.67 ms
    missed_a_frame: share(1.5 * 1000 / 60),
  };
}

async function framesDuring(page, work) {
  const from = await page.evaluate(() => performance.now());
  await work();
  const to = await page.evaluate(() => performance.now());
  const frames = await page.evaluate((a, b) => window.__frames.filter((t) => t >= a && t <= b), from, to);
  const longTasks = await page.evaluate((a, b) => window.__longTasks.filter(([t]) => t >= a && t <= b), from, to);
  return { ...summary(frames), long_tasks: longTasks.length,
           long_task_ms: longTasks.reduce((sum, [, d]) => sum + d, 0) };
}

// Loops of a few sizes around the pad's centre, pressed the whole time (one stroke), for
// `seconds`: one mouse move every `intervalMs`, sent to the browser without waiting for each to be
// handled (as a fast mouse or pen reports, faster than the frames), at most 8 outstanding.
async function draw(page, seconds, intervalMs) {
  const box = await (await page.$('#pad')).boundingBox();
  const cx = box.x + box.width / 2, cy = box.y + box.height / 2;
  const at = (t) => ({ x: cx + box.width * 0.3 * Math.sin(t * 2.1) * Math.cos(t * 0.37),
                       y: cy + box.height * 0.3 * Math.cos(t * 3.3) });
  const cdp = await page.target().createCDPSession();
  const mouse = (type, point) => cdp.send('Input.dispatchMouseEvent',
    { type, ...point, button: 'left', buttons: type === 'mouseReleased' ? 0 : 1, clickCount: 1 });
  const pointerMovesBefore = await page.evaluate(() => window.__pointerMoves);
  await mouse('mouseMoved', at(0));
  await mouse('mousePressed', at(0));
  const start = Date.now(), outstanding = new Set();
  let moves = 0;
  while (Date.now() - start < seconds * 1000) {
    const sent = mouse('mouseMoved', at((Date.now() - start) / 400));
    outstanding.add(sent);
    sent.finally(() => outstanding.delete(sent));
    moves++;
    if (outstanding.size >= 8) await Promise.race(outstanding);
    const next = start + moves * intervalMs;
    if (next > Date.now()) await sleep(next - Date.now());
  }
  await Promise.all(outstanding);
  await mouse('mouseReleased', at((Date.now() - start) / 400));
  const pointerMoves = await page.evaluate(() => window.__pointerMoves) - pointerMovesBefore;
  return { sent: moves / seconds, handled: pointerMoves / seconds };
}

const o = options(process.argv.slice(2));
const browser = await puppeteer.launch({
  executablePath: process.env.LENET5_CHROMIUM || '/usr/bin/chromium', headless: 'new',
  args: ['--no-sandbox', '--disable-dev-shm-usage'],
});
try {
  const page = await browser.newPage();
  await page.setViewport({ width: 1280, height: 1100 });
  await page.evaluateOnNewDocument(recordFrames);
  let answered = 0;
  page.on('response', (r) => { if (r.url().endsWith('/api/classify')) answered++; });
  await page.goto(o.url, { waitUntil: 'networkidle0' });
  await page.waitForFunction(() => document.querySelectorAll('#filters-c3 canvas').length > 0);
  const idle = await framesDuring(page, () => sleep(2000));
  let moves = null;
  const drawing = await framesDuring(page, async () => {
    moves = await draw(page, o.seconds, o.intervalMs);
  });
  await page.waitForNetworkIdle({ idleTime: 300, timeout: 30000 });
  const result = { url: o.url, seconds: o.seconds, mouse_moves_sent_per_s: moves.sent,
                   pointer_moves_handled_per_s: moves.handled,
                   classify_answers: answered, idle, drawing };
  if (o.json) {
    console.log(JSON.stringify(result));
  } else {
    const line = (name, s) => console.log(
      `${name}: ${s.frames} frames, ${s.fps.toFixed(1)} fps; interval median ${s.median_ms.toFixed(1)} ms, ` +
      `p95 ${s.p95_ms.toFixed(1)} ms, max ${s.max_ms.toFixed(1)} ms; over 1/60 s ` +
      `${(100 * s.over_1_60_s).toFixed(1)} %, missed a frame ${(100 * s.missed_a_frame).toFixed(1)} %; ` +
      `long tasks ${s.long_tasks} (${s.long_task_ms.toFixed(0)} ms)`);
    line('idle   ', idle);
    line('drawing', drawing);
    console.log(`drawing: ${moves.sent.toFixed(0)} mouse moves/s sent, ${moves.handled.toFixed(0)}/s ` +
                `reached the page as pointermove; ${answered} classify answers ` +
                `(${(answered / o.seconds).toFixed(1)}/s)`);
  }
} finally {
  await browser.close();
}
