// page.mjs URL PHOTO OUT_DIR [OTHER...] - drive the web page of `hamer serve`
// in Debian's chromium (headless, WebGL on SwiftShader, loopback only) with
// playwright-core, for tests/test_web.py. Uploads PHOTO, waits for the
// result, saves OUT_DIR/canvas.png (the 3D view), OUT_DIR/page.png (the whole
// page), the downloads OUT_DIR/RESULT.json and OUT_DIR/hands.glb; draws the
// first hand's box on the preview and runs it; then uploads each OTHER file
// and reads what the page says. Prints one JSON object.
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
const report = { console: [], pageErrors: [], requests: [] };
try {
  const context = await browser.newContext({ viewport: { width: 1440, height: 1000 }, acceptDownloads: true });
  const page = await context.newPage();
  const table = (sel) => page.$$eval(sel + ' tbody tr',
                                     (trs) => trs.map((tr) => [...tr.cells].map((c) => c.textContent)));
  page.on('console', (m) => { if (m.type() === 'error' || m.type() === 'warning') report.console.push(m.text()); });
  page.on('pageerror', (e) => report.pageErrors.push(String(e)));
  page.on('request', (r) => report.requests.push(r.url()));
  const t0 = Date.now();
  await page.goto(url, { waitUntil: 'load' });
  await page.waitForFunction(() => !document.getElementById('server').textContent.includes('…'));
  report.server = await page.textContent('#server');
  report.page_load_ms = Date.now() - t0;

  // The photo: from choosing it to the result shown (overlay, table, 3D view).
  const t1 = Date.now();
  await page.setInputFiles('#file', photo);
  await page.waitForFunction(() => ['done', 'error'].includes(document.getElementById('status').dataset.state),
                             null, { timeout: 120000 });
  report.result_ms = Date.now() - t1;
  report.status_state = await page.getAttribute('#status', 'data-state');
  report.status = await page.textContent('#status');
  report.page_ms = Number(await page.getAttribute('#status', 'data-ms'));
  report.hand_count = Number(await page.getAttribute('#hand-count', 'data-count'));
  report.rows = await table('#hands');
  report.timings = await table('#timings');
  report.overlay = await page.$eval('#overlay', (img) => ({ complete: img.complete, width: img.naturalWidth,
                                                            height: img.naturalHeight, hidden: img.hidden }));
  report.rendered = await page.getAttribute('#view3d', 'data-rendered');
  await page.locator('#view3d').screenshot({ path: path.join(out, 'canvas.png') });
  await page.screenshot({ path: path.join(out, 'page.png'), fullPage: true });
  for (const [id, name] of [['#dl-json', 'RESULT.json'], ['#dl-glb', 'hands.glb'], ['#dl-obj', 'hands.obj']]) {
    const [download] = await Promise.all([page.waitForEvent('download'), page.click(id)]);
    report[name] = download.suggestedFilename();
    await download.saveAs(path.join(out, name));
  }

  // A box drawn on the preview (the first detected hand's, dragged in
  // screen pixels), then Run: one given hand.
  const box = JSON.parse(fs.readFileSync(path.join(out, 'RESULT.json'), 'utf8')).hands[0].bbox;
  const r = await page.locator('#preview').boundingBox();
  // screen pixels per image pixel: the canvas's CSS width over the photo's width
  const scale = r.width * (await page.$eval('#preview', (c) => Number(c.dataset.scale) / c.width));
  await page.mouse.move(r.x + box[0] * scale, r.y + box[1] * scale);
  await page.mouse.down();
  await page.mouse.move(r.x + box[2] * scale, r.y + box[3] * scale, { steps: 5 });
  await page.mouse.up();
  report.drawn_boxes = await page.inputValue('#boxes');
  await page.click('#run');
  await page.waitForFunction(() => ['done', 'error'].includes(document.getElementById('status').dataset.state) &&
                             !document.getElementById('run').disabled, null, { timeout: 120000 });
  report.drawn_status = await page.textContent('#status');
  report.drawn_rows = await table('#hands');

  // Other files, each uploaded in turn: what the page says (a file that
  // is not an image, one too large, one without hands: the API's answers).
  report.others = [];
  for (const other of others) {
    await page.setInputFiles('#file', other);
    await page.waitForFunction(() => ['done', 'error'].includes(document.getElementById('status').dataset.state) &&
                               !document.getElementById('run').disabled, null, { timeout: 60000 });
    report.others.push({ file: path.basename(other), state: await page.getAttribute('#status', 'data-state'),
                         text: await page.textContent('#status'),
                         count: await page.getAttribute('#hand-count', 'data-count') });
  }
} finally {
  await browser.close();
}
process.stdout.write(JSON.stringify(report) + '\n');
