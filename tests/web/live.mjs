// live.mjs URL CLIP.y4m OUT_DIR SECONDS VIDEO - the web page's webcam in
// Debian's chromium with its fake camera playing CLIP
// (--use-fake-device-for-media-stream --use-file-for-fake-video-capture),
// for tests/test_web.py: switches to the live tab, starts the webcam, lets
// frames go to /v1/live for SECONDS or until a regressed frame came back,
// saves OUT_DIR/live.png (the page), stops; then VIDEO played as a video
// file, until its hands are tracked. Reports, for "camera" and "file", what the page showed
// and every /v1/live request with its start and end (to check that one at
// most is in flight). Prints one JSON object.
import path from 'path';
import { chromium } from 'playwright-core';

const [url, clip, out, seconds, video] = process.argv.slice(2);
const T0 = Date.now();
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  headless: true,
  args: ['--use-angle=swiftshader', '--enable-unsafe-swiftshader', '--no-sandbox',
         '--no-proxy-server', '--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1',
         '--disable-background-networking', '--disable-component-update', '--no-first-run',
         '--use-fake-device-for-media-stream', `--use-file-for-fake-video-capture=${clip}`,
         '--use-fake-ui-for-media-stream', '--autoplay-policy=no-user-gesture-required'],
});
const report = { console: [], pageErrors: [] };
try {
  const context = await browser.newContext({ viewport: { width: 1440, height: 1000 } });
  await context.grantPermissions(['camera']);
  const page = await context.newPage();
  page.on('console', (m) => { if (m.type() === 'error' || m.type() === 'warning') report.console.push(m.text()); });
  page.on('pageerror', (e) => report.pageErrors.push(String(e)));
  const t0 = Date.now(), started = new Map();
  let requests = [];
  page.on('request', (r) => { if (r.url().includes('/v1/live')) started.set(r, Date.now() - t0); });
  page.on('requestfinished', (r) => {
    if (r.url().includes('/v1/live') && !r.url().includes('end=1'))
      requests.push({ url: r.url().replace(/^.*\/v1\/live/, '/v1/live'), start: started.get(r), end: Date.now() - t0 });
  });
  report.launch_s = (Date.now() - T0) / 1000;
  await page.goto(url, { waitUntil: 'load' });
  await page.waitForFunction(() => !document.getElementById('server').textContent.includes('…'));
  report.page_s = (Date.now() - T0) / 1000;
  await page.click('#tab-live');
  for (const mode of ['camera', 'file']) {
    requests = [];
    await page.evaluate(() => { const d = document.body.dataset; d.liveFrames = '0'; d.liveRegressed = '0'; d.liveTracked = '0'; });
    if (mode === 'camera') await page.click('#live-cam');
    else await page.setInputFiles('#live-file', video);
    const until = Date.now() + Number(seconds) * 1000;
    // the camera: until a regressed frame came back; the file: until its hands are tracked
    const t1 = Date.now();
    await page.waitForFunction(([deadline, camera]) => {
      const d = document.body.dataset;
      return Number(d.liveFrames || 0) >= 3 && (camera ? Number(d.liveRegressed || 0) >= 1 : Number(d.liveTracked || 0) >= 1) ||
             Date.now() > deadline;
    }, [until, mode === 'camera'], { timeout: Number(seconds) * 1000 + 60000, polling: 100 });
    const g = {};
    g.seconds = (Date.now() - t1) / 1000;
    g.frames_sent = Number(await page.evaluate(() => document.body.dataset.liveFrames || 0));
    g.tracked_hands = Number(await page.evaluate(() => document.body.dataset.liveTracked || 0));
    g.regressed = Number(await page.evaluate(() => document.body.dataset.liveRegressed || 0));
    g.status = await page.textContent('#status');
    g.hand_count = await page.getAttribute('#hand-count', 'data-count');
    g.rendered = await page.getAttribute('#view3d', 'data-rendered');
    g.hand_rows = await page.$$eval('#hands tbody tr', (trs) => trs.map((tr) => [...tr.cells].map((c) => c.textContent)));
    g.stats = await page.$$eval('#live-stats tbody tr', (trs) => trs.map((tr) => [...tr.cells].map((c) => c.textContent)));
    g.video = await page.$eval('#live-video', (v) => ({ hidden: v.hidden, width: v.videoWidth, height: v.videoHeight }));
    g.marks = await page.$eval('#live-overlay', (c) => {
      const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
      let n = 0;
      for (let i = 3; i < d.length; i += 4) n += d[i] > 0;
      return n;           // pixels the marks cover
    });
    g.read_s = (Date.now() - T0) / 1000;
    if (mode === 'camera') await page.screenshot({ path: path.join(out, 'live.png'), fullPage: true });
    g.shot_s = (Date.now() - T0) / 1000;
    await page.click('#live-stop');
    await page.waitForTimeout(300);
    g.stopped = await page.textContent('#status');
    g.live = requests;
    report[mode] = g;
  }
  report.total_s = (Date.now() - T0) / 1000;
} finally {
  await browser.close();
}
process.stdout.write(JSON.stringify(report) + '\n');
