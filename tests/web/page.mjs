// page.mjs URL PHOTO OUT_DIR [OTHER...] - drive the web page of `hamer serve`
// in Debian's chromium (headless, WebGL on SwiftShader, loopback only) with
// playwright-core, for tests/test_web.py. Uploads PHOTO (threshold 0.4, at
// most 3 hands), waits for the result, saves OUT_DIR/canvas.png (the 3D
// view), OUT_DIR/page.png (the whole page), OUT_DIR/overlay-canvas.png, and
// the four downloads under the names the page gives; hides hand 0 (overlay
// and 3D view), resets the view after an orbit, turns the marks off; draws
// the first hand's box on the preview and runs it; clicks the first example
// photo; then uploads each OTHER file and reads what the page says (the
// first one's page is saved as OUT_DIR/error.png). Prints one JSON object.
import fs from 'fs';
import path from 'path';
import { chromium } from 'playwright-core';

const [url, photo, out, ...others] = process.argv.slice(2);
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  headless: true,
  args: ['--use-angle=swiftshader', '--enable-unsafe-swiftshader', '--no-sandbox',
         // nothing but the server on loopback: no proxy, no other host resolves
         '--no-proxy-server', '--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1',
         '--disable-background-networking', '--disable-component-update', '--no-first-run'],
});
const report = { console: [], pageErrors: [], requests: [], posts: [] };
const settled = () => ['done', 'error'].includes(document.getElementById('status').dataset.state) &&
                      !document.getElementById('run').disabled;
// the next run over: the page counts them (#status's data-runs)
const runsNow = async (page) => Number(await page.getAttribute('#status', 'data-runs') || 0);
const nextRun = (page, n) => page.waitForFunction(
  (k) => Number(document.getElementById('status').dataset.runs || 0) > k, n, { timeout: 120000 });
try {
  const context = await browser.newContext({ viewport: { width: 1440, height: 1000 }, acceptDownloads: true });
  const page = await context.newPage();
  const table = (sel) => page.$$eval(sel + ' tbody tr',
                                     (trs) => trs.map((tr) => [...tr.cells].map((c) => c.textContent)));
  const litPixels = async () => page.$eval('#view3d', (c) => {
    // pixels of the 3D view off its background (a copy: preserveDrawingBuffer)
    const g = document.createElement('canvas');
    g.width = c.width, g.height = c.height;
    const x = g.getContext('2d');
    x.drawImage(c, 0, 0);
    const d = x.getImageData(0, 0, g.width, g.height).data;
    let n = 0;
    for (let i = 0; i < d.length; i += 4)
      if (Math.abs(d[i] - 0x1b) > 24 || Math.abs(d[i + 1] - 0x1f) > 24 || Math.abs(d[i + 2] - 0x27) > 24) n++;
    return n;
  });
  page.on('console', (m) => { if (m.type() === 'error' || m.type() === 'warning') report.console.push(m.text()); });
  page.on('pageerror', (e) => report.pageErrors.push(String(e)));
  page.on('request', (r) => {
    report.requests.push(r.url());
    if (r.method() === 'POST') report.posts.push(r.url().replace(url.replace(/\/$/, ''), ''));
  });
  const t0 = Date.now();
  await page.goto(url, { waitUntil: 'load' });
  await page.waitForFunction(() => !document.getElementById('server').textContent.includes('…'));
  report.server = await page.textContent('#server');
  report.page_load_ms = Date.now() - t0;

  // The photo, with the detector's threshold and count set: from choosing
  // it to the result shown (overlay, table, 3D view).
  await page.fill('#max-hands', '3');
  await page.$eval('#min-score', (e) => { e.value = '0.4'; e.dispatchEvent(new Event('input')); });
  const t1 = Date.now();
  report.posts.length = 0;
  let n = await runsNow(page);
  await page.setInputFiles('#file', photo);
  await nextRun(page, n);
  report.result_ms = Date.now() - t1;
  report.photo_posts = [...report.posts];
  report.status_state = await page.getAttribute('#status', 'data-state');
  report.status = await page.textContent('#status');
  report.page_ms = Number(await page.getAttribute('#status', 'data-ms'));
  report.hand_count = Number(await page.getAttribute('#hand-count', 'data-count'));
  report.rows = await table('#hands');
  report.timings = await table('#timings');
  report.overlay = await page.$eval('#overlay', (c) => ({ width: c.width, height: c.height, hidden: c.hidden }));
  report.rendered = await page.getAttribute('#view3d', 'data-rendered');
  report.lit = await litPixels();
  await page.locator('#view3d').screenshot({ path: path.join(out, 'canvas.png') });
  await page.locator('#overlay').screenshot({ path: path.join(out, 'overlay-canvas.png') });
  await page.screenshot({ path: path.join(out, 'page.png'), fullPage: true });
  report.downloads = {};
  for (const id of ['#dl-json', '#dl-glb', '#dl-obj', '#dl-png']) {
    const [download] = await Promise.all([page.waitForEvent('download'), page.click(id)]);
    const name = download.suggestedFilename();
    report.downloads[id] = name;
    await download.saveAs(path.join(out, name));
  }

  // Hand 0 hidden: the overlay changes, the 3D view shows fewer pixels;
  // an orbit, then Reset view frames the hands as before.
  const overlayOf = () => page.$eval('#overlay', (c) => c.toDataURL());
  const before = await overlayOf();
  await page.click('#hand-toggles input[data-hand="0"]');
  report.hidden_overlay_changed = (await overlayOf()) !== before;
  report.lit_hidden = await litPixels();
  await page.click('#hand-toggles input[data-hand="0"]');
  report.lit_shown = await litPixels();
  const v = await page.locator('#view3d').boundingBox();
  await page.mouse.move(v.x + v.width / 2, v.y + v.height / 2);
  await page.mouse.down();
  await page.mouse.move(v.x + v.width / 2 + 250, v.y + v.height / 2 + 120, { steps: 6 });
  await page.mouse.up();
  for (let i = 0; i < 8; i++) await page.mouse.wheel(0, 400);
  report.lit_orbited = await litPixels();
  await page.click('#reset-view');
  report.lit_reset = await litPixels();
  // the marks off: the overlay is the server's meshes alone
  for (const id of ['#mark-boxes', '#mark-keypoints', '#mark-labels']) await page.uncheck(id);
  report.marks_off_changed = (await overlayOf()) !== before;
  for (const id of ['#mark-boxes', '#mark-keypoints', '#mark-labels']) await page.check(id);
  report.marks_back = (await overlayOf()) === before;

  // A box drawn on the preview (the first detected hand's, dragged in
  // screen pixels), then Run: one given hand.
  const box = JSON.parse(fs.readFileSync(path.join(out, report.downloads['#dl-json']), 'utf8')).hands[0].bbox;
  const r = await page.locator('#preview').boundingBox();
  // screen pixels per image pixel: the canvas's CSS width over the photo's width
  const scale = r.width * (await page.$eval('#preview', (c) => Number(c.dataset.scale) / c.width));
  await page.mouse.move(r.x + box[0] * scale, r.y + box[1] * scale);
  await page.mouse.down();
  await page.mouse.move(r.x + box[2] * scale, r.y + box[3] * scale, { steps: 5 });
  await page.mouse.up();
  report.drawn_boxes = await page.inputValue('#boxes');
  report.posts.length = 0;
  n = await runsNow(page);
  await page.click('#run');
  await nextRun(page, n);
  report.drawn_posts = [...report.posts];
  report.drawn_status = await page.textContent('#status');
  report.drawn_rows = await table('#hands');

  // An example photo (shipped with the page)
  n = await runsNow(page);
  await page.click('.example >> nth=0');
  await nextRun(page, n);
  report.example = { state: await page.getAttribute('#status', 'data-state'), text: await page.textContent('#status'),
                     count: await page.getAttribute('#hand-count', 'data-count'),
                     json: await page.getAttribute('#dl-json', 'download') };

  // Other files, each uploaded in turn: what the page says (a file that
  // is not an image, one too large, one without hands: the API's answers).
  report.others = [];
  for (const other of others) {
    n = await runsNow(page);
    await page.setInputFiles('#file', other);
    await nextRun(page, n);
    if (!report.others.length) await page.screenshot({ path: path.join(out, 'error.png'), fullPage: true });
    report.others.push({ file: path.basename(other), state: await page.getAttribute('#status', 'data-state'),
                         text: await page.textContent('#status'),
                         count: await page.getAttribute('#hand-count', 'data-count'),
                         overlay_hidden: await page.$eval('#overlay', (c) => c.hidden),
                         rendered: await page.getAttribute('#view3d', 'data-rendered'),
                         json_href: await page.getAttribute('#dl-json', 'href') });
  }
} finally {
  await browser.close();
}
process.stdout.write(JSON.stringify(report) + '\n');
