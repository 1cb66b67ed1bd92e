// The web page of `hamer serve`: a photo in (dropped or picked, with boxes
// typed or drawn, or none for the server's detector); out: the overlay PNG
// (/v1/render), the hands (/v1/predict's RESULT.json) and a 3D view of the
// GLB (/v1/predict?format=glb) with three.js. No inline code (the page's
// Content-Security-Policy allows scripts from this origin only).
import * as THREE from './vendor/three.module.js';
import { GLTFLoader } from './vendor/GLTFLoader.js';
import { OrbitControls } from './vendor/OrbitControls.js';

const $ = (id) => document.getElementById(id);
const BACKGROUND = 0x1b1f27;          // the 3D view's clear colour (tests/web/page.mjs counts pixels off it)
const RIGHT_COLOUR = 0x6fa8dc, LEFT_COLOUR = 0xf0a35e;

let file = null;                      // the photo (a File)
let photo = null;                     // its decoded image, for the preview
let boxes = [];                       // [{x1, y1, x2, y2, left}] in image pixels
let urls = [];                        // object URLs of the last result, revoked on the next
let drawing = null;                   // the box being dragged

// ---- status line ----

function setStatus(state, text) {
  const s = $('status');
  s.dataset.state = state;
  s.textContent = text;
}

// An API answer that is not 200, as a sentence: the server's own message
// ({"error": ...}) behind what the status means for the user.
function apiError(status, body) {
  let msg = body;
  try {
    const j = JSON.parse(body);
    if (j && typeof j.error === 'string') msg = j.error;
  } catch (e) { /* not JSON: the text itself */ }
  msg = String(msg || '').trim() || '(no message)';
  const what = {
    400: 'The server could not use this photo or these boxes',
    404: 'Not found',
    413: 'Too large for the server',
    415: 'Unsupported file type',
    503: 'The server is busy or not ready; retry in a moment',
    504: 'The server took too long',
  }[status] || 'The server answered an error';
  return `${what} (HTTP ${status}): ${msg}`;
}

// ---- boxes: text <-> list, and drawing on the preview ----

function fmt(v) { return String(Math.round(v * 10) / 10); }

function boxesText() {
  return boxes.map((b) => [b.x1, b.y1, b.x2, b.y2].map(fmt).join(',') + (b.left ? ':left' : '')).join(';');
}

function parseBoxes(text) {
  const out = [];
  for (const part of text.split(';').map((p) => p.trim()).filter(Boolean)) {
    const [coords, side = 'right'] = part.split(':');
    const v = coords.split(',').map(Number);
    if (v.length !== 4 || v.some((x) => !Number.isFinite(x)) || !['left', 'right'].includes(side.trim()))
      throw new Error(`bad box '${part}': expected x1,y1,x2,y2 or x1,y1,x2,y2:left`);
    out.push({ x1: v[0], y1: v[1], x2: v[2], y2: v[3], left: side.trim() === 'left' });
  }
  return out;
}

function drawPreview() {
  const c = $('preview');
  if (!photo) return;
  const w = Math.min(photo.width, c.parentElement.clientWidth || photo.width);
  const scale = w / photo.width;
  c.width = Math.round(photo.width * scale);
  c.height = Math.round(photo.height * scale);
  c.dataset.scale = String(scale);
  const g = c.getContext('2d');
  g.drawImage(photo, 0, 0, c.width, c.height);
  g.lineWidth = 2;
  for (const b of drawing ? [...boxes, drawing] : boxes) {
    g.strokeStyle = b.left ? '#f0a35e' : '#6fa8dc';
    g.strokeRect(b.x1 * scale, b.y1 * scale, (b.x2 - b.x1) * scale, (b.y2 - b.y1) * scale);
  }
}

function pointerAt(ev) {
  const c = $('preview'), r = c.getBoundingClientRect();
  const scale = Number(c.dataset.scale) * (r.width / c.width);
  const clamp = (v, hi) => Math.max(0, Math.min(hi, v));
  return [clamp((ev.clientX - r.left) / scale, photo.width), clamp((ev.clientY - r.top) / scale, photo.height)];
}

function setupDrawing() {
  const c = $('preview');
  c.addEventListener('pointerdown', (ev) => {
    if (!photo) return;
    const [x, y] = pointerAt(ev);
    drawing = { x0: x, y0: y, x1: x, y1: y, x2: x, y2: y, left: $('side').value === 'left' };
    c.setPointerCapture(ev.pointerId);
  });
  c.addEventListener('pointermove', (ev) => {
    if (!drawing) return;
    const [x, y] = pointerAt(ev);
    Object.assign(drawing, { x1: Math.min(x, drawing.x0), y1: Math.min(y, drawing.y0),
                             x2: Math.max(x, drawing.x0), y2: Math.max(y, drawing.y0) });
    drawPreview();
  });
  c.addEventListener('pointerup', () => {
    if (!drawing) return;
    const b = drawing;
    drawing = null;
    if (b.x2 - b.x1 >= 4 && b.y2 - b.y1 >= 4) boxes.push({ x1: b.x1, y1: b.y1, x2: b.x2, y2: b.y2, left: b.left });
    $('boxes').value = boxesText();
    drawPreview();
  });
  $('boxes').addEventListener('change', () => {
    try {
      boxes = parseBoxes($('boxes').value);
      drawPreview();
    } catch (e) {
      setStatus('error', e.message);
    }
  });
  $('clear').addEventListener('click', () => {
    boxes = [];
    $('boxes').value = '';
    drawPreview();
  });
}

// ---- the 3D view ----

const view = {};

function setupView() {
  const canvas = $('view3d');
  try {
    view.renderer = new THREE.WebGLRenderer({ canvas, antialias: true, preserveDrawingBuffer: true });
  } catch (e) {
    // no WebGL: the rest of the page works; the GLB can still be downloaded
    view.renderer = null;
    const p = document.createElement('p');
    p.className = 'no-webgl';
    p.textContent = 'No 3D view: this browser has no WebGL (' + e.message + '). Download the GLB instead.';
    canvas.replaceWith(p);
    return;
  }
  view.renderer.setPixelRatio(window.devicePixelRatio || 1);
  view.renderer.setClearColor(BACKGROUND, 1);
  view.scene = new THREE.Scene();
  view.camera = new THREE.PerspectiveCamera(35, 1, 0.01, 100);
  view.scene.add(view.camera);
  view.scene.add(new THREE.HemisphereLight(0xffffff, 0x404858, 1.6));
  const key = new THREE.DirectionalLight(0xffffff, 2.2);
  key.position.set(0.5, 1, 1);
  view.camera.add(key);             // the light follows the camera around the hands
  view.controls = new OrbitControls(view.camera, canvas);
  view.controls.addEventListener('change', render);
  new ResizeObserver(resize).observe(canvas.parentElement);
  resize();
}

function resize() {
  if (!view.renderer) return;
  const canvas = $('view3d'), w = canvas.parentElement.clientWidth, h = Math.round(w * 0.75);
  view.renderer.setSize(w, h, false);
  canvas.style.width = w + 'px';
  canvas.style.height = h + 'px';
  view.camera.aspect = w / h;
  view.camera.updateProjectionMatrix();
  render();
}

function render() { if (view.renderer) view.renderer.render(view.scene, view.camera); }

function clearModel() {
  if (!view.model) return;
  view.scene.remove(view.model);
  view.model.traverse((o) => {
    if (o.geometry) o.geometry.dispose();
    if (o.material) o.material.dispose();
  });
  view.model = null;
}

// Frame the hands as the photo's camera saw them: the GLB is in that
// camera's frame (at the origin, y up, looking down -z), so the view starts
// there, looking at the hands' centre, with the field of view that just
// holds every hand (the overlay's picture, cropped to the hands). Orbiting
// turns around that centre; zooming moves towards it.
function frame(model) {
  const corners = [];
  model.traverse((o) => {
    if (!o.isMesh) return;
    const b = new THREE.Box3().setFromObject(o, true);      // skinned positions
    if (b.isEmpty()) return;
    for (let i = 0; i < 8; i++)
      corners.push(new THREE.Vector3(i & 1 ? b.max.x : b.min.x, i & 2 ? b.max.y : b.min.y, i & 4 ? b.max.z : b.min.z));
  });
  if (!corners.length) return;
  const centre = new THREE.Box3().setFromPoints(corners).getCenter(new THREE.Vector3());
  const cam = view.camera, dist = Math.max(centre.length(), 1e-3);
  cam.position.set(0, 0, 0);
  if (centre.z > -1e-3) cam.position.set(centre.x, centre.y, centre.z + 1);   // not in front of the camera
  cam.up.set(0, 1, 0);
  cam.lookAt(centre);
  cam.updateMatrixWorld(true);
  const inv = cam.matrixWorldInverse;
  let tx = 1e-4, ty = 1e-4;
  for (const p of corners) {
    const q = p.clone().applyMatrix4(inv);
    const z = Math.max(-q.z, 1e-6);
    tx = Math.max(tx, Math.abs(q.x) / z);
    ty = Math.max(ty, Math.abs(q.y) / z);
  }
  const half = Math.max(ty, tx / cam.aspect) * 1.25;             // a margin around the hands
  cam.fov = Math.min(60, Math.max(0.2, THREE.MathUtils.radToDeg(2 * Math.atan(half))));
  cam.near = dist / 1000;
  cam.far = dist * 100;
  cam.updateProjectionMatrix();
  view.controls.target.copy(centre);
  view.controls.update();
}

// Show the GLB's hands (in the photo's camera frame, y up, looking down -z):
// the camera starts where the photo's was, looking at the hands.
function showModel(buffer, hands) {
  return new Promise((resolve, reject) => {
    if (!view.renderer) return resolve(0);
    new GLTFLoader().parse(buffer, '', (gltf) => {
      clearModel();
      const model = gltf.scene, ok = hands.filter((h) => !h.error);
      let k = 0;
      model.traverse((o) => {
        if (!o.isMesh) return;
        const hand = ok[k++];
        o.material = new THREE.MeshStandardMaterial({
          color: hand && !hand.is_right ? LEFT_COLOUR : RIGHT_COLOUR, roughness: 0.6, metalness: 0.0,
          side: THREE.DoubleSide });
        o.frustumCulled = false;
      });
      view.scene.add(model);
      view.model = model;
      model.updateMatrixWorld(true);
      frame(model);
      render();
      resolve(k);
    }, (err) => reject(new Error('cannot read the GLB: ' + (err && err.message ? err.message : err))));
  });
}

// ---- requests ----

// POST the photo; a 503 (queue full, not ready yet) is tried again after
// its Retry-After, twice at most, before it is shown.
async function request(path, body, type) {
  const t0 = performance.now();
  for (let attempt = 0; ; attempt++) {
    let resp;
    try {
      resp = await fetch(path, { method: 'POST', body, headers: { 'Content-Type': type } });
    } catch (e) {
      throw new Error('cannot reach the server: ' + e.message);
    }
    const blob = await resp.blob();
    if (resp.status !== 503 || attempt >= 2) return { status: resp.status, blob, ms: performance.now() - t0 };
    const wait = Math.min(10, Math.max(1, Number(resp.headers.get('Retry-After')) || 1));
    await new Promise((r) => setTimeout(r, wait * 1000));
  }
}

// The OBJ is asked for only when its link is clicked: [query, file, type]
// of the last result, or null before one.
let objRequest = null;

async function fetchObj(ev) {
  const a = $('dl-obj');
  if (a.getAttribute('href') || !objRequest) return;   // already fetched: the browser downloads it
  ev.preventDefault();
  if (a.dataset.busy === '1') return;
  a.dataset.busy = '1';
  try {
    const [query, body, type] = objRequest;
    const r = await request('/v1/predict' + query, body, type);
    if (r.status !== 200) throw new Error(apiError(r.status, await r.blob.text()));
    link('dl-obj', new Blob([await r.blob.arrayBuffer()], { type: 'model/obj' }));
    a.click();
  } catch (e) {
    setStatus('error', 'OBJ: ' + e.message);
  } finally {
    a.dataset.busy = '0';
  }
}

function link(id, blob) {
  const a = $(id), url = URL.createObjectURL(blob);
  urls.push(url);
  a.href = url;
  a.classList.remove('disabled');
}

function resetResult() {
  for (const u of urls) URL.revokeObjectURL(u);
  urls = [];
  objRequest = null;
  for (const id of ['dl-json', 'dl-glb', 'dl-png', 'dl-obj']) {
    $(id).removeAttribute('href');
    $(id).classList.add('disabled');
  }
  $('overlay').hidden = true;
  $('hands').querySelector('tbody').replaceChildren();
  $('timings').querySelector('tbody').replaceChildren();
  $('hand-count').textContent = '–';
  $('hand-count').dataset.count = '';
  if (view.renderer) $('view3d').dataset.rendered = '0';
}

function row(tbody, cells) {
  const tr = document.createElement('tr');
  for (const c of cells) {
    const td = document.createElement('td');
    td.textContent = c;
    tr.appendChild(td);
  }
  tbody.appendChild(tr);
}

async function run(t0 = performance.now()) {
  if (!file) return;
  let query = '';
  try {
    boxes = parseBoxes($('boxes').value);
  } catch (e) {
    setStatus('error', e.message);
    return;
  }
  if (boxes.length) query = 'boxes=' + encodeURIComponent(boxesText());
  drawPreview();
  resetResult();
  $('run').disabled = true;
  setStatus('busy', boxes.length ? `Regressing ${boxes.length} hand(s)…` : 'Detecting and regressing the hands…');
  // The server decodes JPEG and PNG; anything else is sent as a JPEG for
  // the server to say what is wrong with it.
  const type = file.type === 'image/png' ? 'image/png' : 'image/jpeg';
  const q = (extra) => (query || extra ? '?' + [query, extra].filter(Boolean).join('&') : '');
  try {
    const [pj, pr, pg] = await Promise.all([
      request('/v1/predict' + q(''), file, type),
      request('/v1/render' + q(''), file, type),
      request('/v1/predict' + q('format=glb'), file, type),
    ]);
    for (const r of [pj, pr, pg])
      if (r.status !== 200) throw new Error(apiError(r.status, await r.blob.text()));
    const text = await pj.blob.text(), result = JSON.parse(text);
    const hands = result.hands || [];
    link('dl-json', new Blob([text], { type: 'application/json' }));
    link('dl-png', pr.blob);
    link('dl-glb', pg.blob);
    objRequest = [q('format=obj'), file, type];
    $('dl-obj').classList.remove('disabled');
    const img = $('overlay');
    img.src = URL.createObjectURL(pr.blob);
    urls.push(img.src);
    await img.decode();
    img.hidden = false;
    $('hand-count').textContent = String(hands.length);
    $('hand-count').dataset.count = String(hands.length);
    const tbody = $('hands').querySelector('tbody');
    hands.forEach((h, i) => row(tbody, [
      String(i), h.error ? 'error: ' + h.error : h.is_right ? 'right' : 'left',
      (h.bbox || []).map((v) => Math.round(v)).join(', '),
      h.detection ? h.detection.score.toFixed(3) : result.boxes === 'given' ? 'given' : '–']));
    await showModel(await pg.blob.arrayBuffer(), hands);
    await new Promise((r) => requestAnimationFrame(r));
    render();
    if (view.renderer) $('view3d').dataset.rendered = '1';
    const total = performance.now() - t0;
    const tt = $('timings').querySelector('tbody');
    for (const [k, v] of Object.entries(result.timings_ms || {})) row(tt, ['server ' + k, v.toFixed(1) + ' ms']);
    row(tt, ['POST /v1/predict (JSON)', pj.ms.toFixed(0) + ' ms']);
    row(tt, ['POST /v1/render (PNG)', pr.ms.toFixed(0) + ' ms']);
    row(tt, ['POST /v1/predict?format=glb', pg.ms.toFixed(0) + ' ms']);
    row(tt, ['photo to result, in this page', total.toFixed(0) + ' ms']);
    $('status').dataset.ms = total.toFixed(0);
    const none = hands.length === 0 && result.boxes === 'detected' ? ' The detector found no hand in this photo.' : '';
    setStatus('done', `Done: ${hands.length} hand(s) in ${(total / 1000).toFixed(2)} s.${none}`);
  } catch (e) {
    setStatus('error', e.message);
  } finally {
    $('run').disabled = !file;
  }
}

// ---- the photo ----

async function pick(f) {
  if (!f) return;
  const t0 = performance.now();
  setStatus('busy', 'Reading the photo…');
  $('run').disabled = true;
  file = f;
  boxes = [];
  $('boxes').value = '';
  photo = null;
  $('preview-wrap').hidden = true;
  try {
    photo = await createImageBitmap(f);
    $('preview-wrap').hidden = false;
    drawPreview();
  } catch (e) {
    // not an image the browser reads: the server says what is wrong with it
  }
  await run(t0);
}

function setupInput() {
  const drop = $('drop');
  $('file').addEventListener('change', () => pick($('file').files[0]));
  drop.addEventListener('dragover', (ev) => { ev.preventDefault(); drop.classList.add('over'); });
  drop.addEventListener('dragleave', () => drop.classList.remove('over'));
  drop.addEventListener('drop', (ev) => {
    ev.preventDefault();
    drop.classList.remove('over');
    pick(ev.dataTransfer.files[0]);
  });
  $('run').addEventListener('click', () => run());
  $('dl-obj').addEventListener('click', fetchObj);
  window.addEventListener('resize', drawPreview);
}

async function serverInfo() {
  try {
    const r = await (await fetch('/readyz')).json();
    const d = r.detector || {};
    let text = `server: ${r.ready ? 'ready' : r.phase}`;
    text += d.loaded ? ` · detector loaded${d.lite ? ' (lite)' : ''}` : ' · no detector: draw or type boxes';
    const info = await fetch('/info');
    if (info.ok) {
      const i = await info.json();
      text += ` · ${i.precision} · ViT depth ${i.model.vit_depth} · ${i.workers} worker(s) · v${i.version}`;
    }
    $('server').textContent = text;
  } catch (e) {
    $('server').textContent = 'server: not reachable';
  }
}

setupInput();
setupDrawing();
setupView();
serverInfo();
