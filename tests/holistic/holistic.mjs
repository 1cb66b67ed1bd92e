// holistic.mjs URL NAME... - run the real MediaPipe Holistic (npm
// @mediapipe/holistic, its WebAssembly graphs) in Debian's chromium
// (headless, WebGL on SwiftShader, loopback only) on each photo URL/NAME,
// modelComplexity 1 (pose_landmark_full), reset() between photos, for
// tests/test_holistic_web.py. Prints one JSON object: per photo the pose
// landmarks and the two hands' landmarks in image pixels (null when not
// found) and the time of the send() call.
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
  await page.goto(url + '/index.html', { waitUntil: 'load' });
  await page.evaluate(async () => {
    const h = new window.Holistic({ locateFile: (f) => 'holistic/' + f });
    h.setOptions({ modelComplexity: 1, smoothLandmarks: false, enableSegmentation: false,
                   refineFaceLandmarks: false, selfieMode: false,
                   minDetectionConfidence: 0.5, minTrackingConfidence: 0.5 });
    window.results = null;
    h.onResults((r) => { window.results = r; });
    await h.initialize();
    window.holistic = h;
  });
  report.init_ms = Date.now() - t0;
  for (const name of names) {
    report.photos[name] = await page.evaluate(async (src) => {
      const img = document.getElementById('photo');
      img.src = src;
      await img.decode();
      const W = img.naturalWidth, H = img.naturalHeight;
      const h = window.holistic;
      h.reset();
      window.results = null;
      const t0 = performance.now();
      await h.send({ image: img });
      const ms = performance.now() - t0;
      const r = window.results || {};
      const px = (l, vis) => (l ? l.map((p) => (vis ? [p.x * W, p.y * H, p.z * W, p.visibility]
                                                    : [p.x * W, p.y * H, p.z * W])) : null);
      return { width: W, height: H, ms, pose: px(r.poseLandmarks, true),
               left: px(r.leftHandLandmarks, false), right: px(r.rightHandLandmarks, false) };
    }, 'photos/' + name);
  }
} finally {
  await browser.close();
}
console.log(JSON.stringify(report));
