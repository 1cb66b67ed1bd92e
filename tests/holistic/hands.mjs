// hands.mjs URL NAME... - run the real MediaPipe Hands (npm
// @mediapipe/hands, its WebAssembly graphs, CPU inference) in Debian's
// chromium (headless, loopback only) on each photo URL/NAME: maxNumHands 4,
// modelComplexity 1 (the full models), thresholds 0.5, reset() between
// photos so palm detection runs on each, for tests/test_holistic_web.py.
// Prints one JSON object: per photo the hands' landmarks in image pixels
// and their handedness label and score (MediaPipe's, which assumes a
// mirrored image), and the time of the send() call.
import { chromium } from 'playwright-core';

const [url, ...names] = process.argv.slice(2);
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  headless: true,
  args: ['--use-angle=swiftshader', '--enable-unsafe-swiftshader', '--no-sandbox',
         '--no-proxy-server', '--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1',
         '--disable-background-networking', '--disable-component-update', '--no-first-run'],
});
const report = { console: [], pageErrors: [], photos: {} };
try {
  const page = await browser.newPage();
  page.on('pageerror', (e) => report.pageErrors.push(String(e)));
  page.on('console', (m) => { if (m.type() === 'error') report.console.push(m.text()); });
  const t0 = Date.now();
  await page.goto(url + '/hands.html', { waitUntil: 'load' });
  await page.evaluate(async () => {
    const h = new window.Hands({ locateFile: (f) => 'hands/' + f });
    h.setOptions({ maxNumHands: 4, modelComplexity: 1, minDetectionConfidence: 0.5,
                   minTrackingConfidence: 0.5, selfieMode: false, useCpuInference: true });
    window.results = null;
    h.onResults((r) => { window.results = r; });
    await h.initialize();
    window.hands = h;
  });
  report.init_ms = Date.now() - t0;
  for (const name of names) {
    report.photos[name] = await page.evaluate(async (src) => {
      const img = document.getElementById('photo');
      img.src = src;
      await img.decode();
      const W = img.naturalWidth, H = img.naturalHeight;
      const h = window.hands;
      h.reset();
      window.results = null;
      const t0 = performance.now();
      await h.send({ image: img });
      const ms = performance.now() - t0;
      const r = window.results || {};
      const lms = (r.multiHandLandmarks || []).map((l) => l.map((p) => [p.x * W, p.y * H, p.z * W]));
      const sides = (r.multiHandedness || []).map((c) => ({ label: c.label, score: c.score }));
      return { width: W, height: H, ms, hands: lms, handedness: sides };
    }, 'photos/' + name);
  }
} finally {
  await browser.close();
}
console.log(JSON.stringify(report));
