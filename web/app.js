// The web page of `hamer serve`.
//
// A photo (dropped, picked or an example; boxes typed or drawn, or none for
// the server's detector with the page's threshold and maximum of hands) goes
// to the server once: /v1/predict?format=all answers RESULT.json, the
// overlay (meshes; the page draws the boxes, keypoints and labels over it,
// each of them and each hand shown or not), the GLB (the 3D view, with a
// toggle per hand and a reset) and the OBJ from one run of the job.
//
// Webcam or video file: the page sends frames to /v1/live, one request in
// flight: when an answer comes, the newest frame goes next (frames that came
// meanwhile are never sent). Each answer holds the server's newest tracked
// frame (boxes, landmarks) and, when there is a newer one, its newest
// regressed frame (the hands and their vertices: the 3D view follows them).
//
// No inline code (the page's Content-Security-Policy allows scripts from
// this origin only).
import * as THREE from './vendor/three.module.js';
import { GLTFLoader } from './vendor/GLTFLoader.js';
import { OrbitControls } from './vendor/OrbitControls.js';

const $ = (id) => document.getElementById(id);
const BACKGROUND = 0x1b1f27;          // the 3D view's clear colour (tests/web/page.mjs counts pixels off it)
const RIGHT_COLOUR = 0x6fa8dc, LEFT_COLOUR = 0xf0a35e;
// the marks' colours, as the server's (src/render/marks.c)
const MARK_RIGHT = 'rgb(40,220,60)', MARK_LEFT = 'rgb(255,150,20)', MARK_JOINT = 'rgb(240,30,30)';
// the 21 keypoints' bones (wrist 0; thumb 1-4, index 5-8, middle 9-12, ring 13-16, little 17-20)
const BONES = [[0, 1], [1, 2], [2, 3], [3, 4], [0, 5], [5, 6], [6, 7], [7, 8], [5, 9], [9, 10], [10, 11], [11, 12],
               [9, 13], [13, 14], [14, 15], [15, 16], [13, 17], [0, 17], [17, 18], [18, 19], [19, 20]];
// what the server decodes (the Content-Type only admits the body: the bytes decide)
const TYPES = ['image/jpeg', 'image/png', 'image/webp', 'image/avif', 'image/bmp', 'image/tiff', 'image/gif'];

let file = null;                      // the photo (a File or Blob with a name)
let photo = null;                     // its decoded image, for the preview
let boxes = [];                       // [{x1, y1, x2, y2, left}] in image pixels
let urls = [];                        // object URLs of the last result, revoked on the next
let drawing = null;                   // the box being dragged
let result = null;                    // the last photo result: {hands, boxes, overlay (ImageBitmap)}
let runs = 0;                         // photos and runs finished (#status's data-runs, for the tests)
const hidden = new Set();             // hands hidden (by index) in the overlay and the 3D view

// ---- status line and progress ----

function setStatus(state, text) {
  const s = $('status');
  s.dataset.state = state;
  s.textContent = text;
  $('progress').hidden = state !== 'busy';
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

// ---- the marks (boxes, keypoints, labels) over a picture ----

function drawMarks(g, hands, scale, opts) {
  const lw = Math.max(1.5, Math.max(g.canvas.width, g.canvas.height) / 400);
  g.lineCap = 'round';
  hands.forEach((h, i) => {
    if (opts.hidden && opts.hidden.has(i)) return;
    const colour = h.is_right ? MARK_RIGHT : MARK_LEFT;
    const b = (h.bbox || []).map((v) => v * scale);
    if (opts.boxes && b.length === 4) {
      g.strokeStyle = colour;
      g.lineWidth = lw;
      g.strokeRect(b[0], b[1], b[2] - b[0], b[3] - b[1]);
    }
    const k = h.keypoints_2d || (h.detection && h.detection.landmarks);
    if (opts.keypoints && k && k.length === 21) {
      g.strokeStyle = colour;
      g.lineWidth = lw;
      g.beginPath();
      for (const [a, c] of BONES) {
        g.moveTo(k[a][0] * scale, k[a][1] * scale);
        g.lineTo(k[c][0] * scale, k[c][1] * scale);
      }
      g.stroke();
      g.fillStyle = MARK_JOINT;
      for (const p of k) {
        g.beginPath();
        g.arc(p[0] * scale, p[1] * scale, 1.2 * lw, 0, 2 * Math.PI);
        g.fill();
      }
    }
    if (opts.labels && b.length === 4) {
      const score = h.detection && typeof h.detection.score === 'number' ? ' ' + h.detection.score.toFixed(2)
        : typeof h.detector_score === 'number' ? ' ' + h.detector_score.toFixed(2) : '';
      const text = `#${i} ${h.error ? 'error' : h.is_right ? 'right' : 'left'}${score}`;
      const px = Math.max(11, Math.round(lw * 7));
      g.font = `bold ${px}px ui-monospace, monospace`;
      const tw = g.measureText(text).width + px * 0.6, th = px * 1.35;
      let x = Math.max(0, Math.min(b[0], g.canvas.width - tw)), y = b[1] - th;
      if (y < 0) y = b[1];
      g.fillStyle = colour;
      g.fillRect(x, y, tw, th);
      g.fillStyle = '#101010';
      g.fillText(text, x + px * 0.3, y + px * 1.02);
    }
  });
}

function markOptions() {
  return { boxes: $('mark-boxes').checked, keypoints: $('mark-keypoints').checked, labels: $('mark-labels').checked,
           hidden };
}

// The photo's overlay: the server's meshes, then the marks chosen.
function drawOverlay() {
  const c = $('overlay');
  if (!result || !result.overlay) return;
  c.width = result.overlay.width;
  c.height = result.overlay.height;
  const g = c.getContext('2d');
  g.drawImage(result.overlay, 0, 0);
  drawMarks(g, result.hands, 1, markOptions());
  c.hidden = false;
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
  $('reset-view').addEventListener('click', () => {
    if (view.model) frame(view.model);
    render();
  });
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
  if (!view.renderer || !view.model) return;
  view.scene.remove(view.model);
  view.model.traverse((o) => {
    if (o.geometry) o.geometry.dispose();
    if (o.material) o.material.dispose();
  });
  view.model = null;
  render();
}

// Frame the hands as the photo's camera saw them: the hands are in that
// camera's frame (at the origin, y up, looking down -z), so the view starts
// there, looking at the hands' centre, with the field of view that just
// holds every visible hand. Orbiting turns around that centre; zooming
// moves towards it. Reset view frames them again.
function frame(model) {
  const corners = [];
  model.traverse((o) => {
    if (!o.isMesh || !o.visible || (o.parent && !o.parent.visible)) return;
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

// The GLB's nodes of a hand are named hand_I_right|left (its place and
// skeleton) and hand_I_mesh (its skinned mesh; I: the hand's index in
// RESULT.json): shown or hidden with its toggle.
function applyHidden() {
  if (!view.model) return;
  view.model.traverse((o) => {
    const m = /^hand_(\d+)_(right|left|mesh)$/.exec(o.name || '');
    if (m) o.visible = !hidden.has(Number(m[1]));
  });
  render();
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
      applyHidden();
      frame(model);
      render();
      $('reset-view').disabled = false;
      resolve(k);
    }, (err) => reject(new Error('cannot read the GLB: ' + (err && err.message ? err.message : err))));
  });
}

// ---- per-hand toggles ----

function handToggles(hands) {
  const span = $('hand-toggles');
  span.replaceChildren();
  hands.forEach((h, i) => {
    const label = document.createElement('label');
    const box = document.createElement('input');
    box.type = 'checkbox';
    box.checked = !hidden.has(i);
    box.dataset.hand = String(i);
    box.addEventListener('change', () => {
      if (box.checked) hidden.delete(i);
      else hidden.add(i);
      for (const other of document.querySelectorAll(`input[data-hand="${i}"]`)) other.checked = box.checked;
      applyHidden();
      drawOverlay();
      refreshPng();
    });
    label.append(box, ` #${i} ${h.error ? 'error' : h.is_right ? 'right' : 'left'}`);
    span.appendChild(label);
  });
}

// ---- requests ----

// POST; a 503 (queue full, not ready yet) is tried again after its
// Retry-After, twice at most, before it is shown.
async function request(path, body, type) {
  const t0 = performance.now();
  for (let attempt = 0; ; attempt++) {
    let resp;
    try {
      resp = await fetch(path, { method: 'POST', body, headers: type ? { 'Content-Type': type } : {} });
    } catch (e) {
      throw new Error('cannot reach the server: ' + e.message);
    }
    if (resp.status !== 503 || attempt >= 2) return { status: resp.status, resp, ms: performance.now() - t0 };
    await resp.arrayBuffer();
    const wait = Math.min(10, Math.max(1, Number(resp.headers.get('Retry-After')) || 1));
    await new Promise((r) => setTimeout(r, wait * 1000));
  }
}

function link(id, blob, name) {
  const a = $(id), url = URL.createObjectURL(blob);
  urls.push(url);
  a.href = url;
  a.download = name;
  a.classList.remove('disabled');
}

// The downloads' base name: the photo's, without its extension.
function baseName() {
  const n = (file && file.name) || 'photo';
  const dot = n.lastIndexOf('.');
  return (dot > 0 ? n.slice(0, dot) : n).replace(/[^\w.-]+/g, '_') || 'photo';
}

// overlay.png is the picture shown: the meshes and the marks chosen.
function refreshPng() {
  if (!result || !result.overlay) return;
  $('overlay').toBlob((blob) => { if (blob) link('dl-png', blob, baseName() + '_overlay.png'); }, 'image/png');
}

function resetResult() {
  for (const u of urls) URL.revokeObjectURL(u);
  urls = [];
  result = null;
  hidden.clear();
  for (const id of ['dl-json', 'dl-glb', 'dl-png', 'dl-obj']) {
    $(id).removeAttribute('href');
    $(id).classList.add('disabled');
  }
  $('overlay').hidden = true;
  $('hands').querySelector('tbody').replaceChildren();
  $('timings').querySelector('tbody').replaceChildren();
  $('hand-toggles').replaceChildren();
  $('hand-count').textContent = '–';
  $('hand-count').dataset.count = '';
  $('reset-view').disabled = true;
  clearModel();
  if (view.renderer) $('view3d').dataset.rendered = '0';
}

function row(tbody, cells) {
  const tr = document.createElement('tr');
  for (const c of cells) {
    const td = document.createElement('td');
    if (c instanceof Node) td.appendChild(c);
    else td.textContent = c;
    tr.appendChild(td);
  }
  tbody.appendChild(tr);
}

function detectorQuery() {
  const ms = Number($('min-score').value), mh = Math.round(Number($('max-hands').value));
  return [`min_score=${ms.toFixed(2)}`, `max_hands=${Math.min(8, Math.max(1, mh || 2))}`];
}

async function run(t0 = performance.now()) {
  if (!file) return;
  try {
    boxes = parseBoxes($('boxes').value);
  } catch (e) {
    setStatus('error', e.message);
    return;
  }
  const params = ['format=all', 'draw=mesh'];
  if (boxes.length) params.push('boxes=' + encodeURIComponent(boxesText()));
  else params.push(...detectorQuery());
  drawPreview();
  resetResult();
  $('run').disabled = true;
  setStatus('busy', boxes.length ? `Regressing ${boxes.length} hand(s)…` : 'Detecting and regressing the hands…');
  // The server reads the formats in TYPES; anything else is sent as a JPEG
  // for the server to say what is wrong with it.
  const type = TYPES.includes(file.type) ? file.type : 'image/jpeg';
  try {
    const r = await request('/v1/predict?' + params.join('&'), file, type);
    if (r.status !== 200) throw new Error(apiError(r.status, await r.resp.text()));
    const parts = await r.resp.formData();
    const text = await parts.get('result').text(), res = JSON.parse(text);
    const hands = res.hands || [];
    const overlay = await createImageBitmap(parts.get('overlay'));
    result = { hands, boxes: res.boxes, overlay };
    const base = baseName();
    link('dl-json', new Blob([text], { type: 'application/json' }), base + '.json');
    link('dl-glb', parts.get('glb'), base + '.glb');
    link('dl-obj', parts.get('obj'), base + '.obj');
    drawOverlay();
    refreshPng();
    $('hand-count').textContent = String(hands.length);
    $('hand-count').dataset.count = String(hands.length);
    const tbody = $('hands').querySelector('tbody');
    hands.forEach((h, i) => {
      const show = document.createElement('input');
      show.type = 'checkbox';
      show.checked = true;
      show.dataset.hand = String(i);
      show.addEventListener('change', () => {
        const t = document.querySelector(`#hand-toggles input[data-hand="${i}"]`);
        if (t) { t.checked = show.checked; t.dispatchEvent(new Event('change')); }
      });
      row(tbody, [String(i), h.error ? 'error: ' + h.error : h.is_right ? 'right' : 'left',
                  (h.bbox || []).map((v) => Math.round(v)).join(', '),
                  h.detection ? h.detection.score.toFixed(3) : res.boxes === 'given' ? 'given' : '–', show]);
    });
    handToggles(hands);
    await showModel(await parts.get('glb').arrayBuffer(), hands);
    await new Promise((ok) => requestAnimationFrame(ok));
    render();
    if (view.renderer) $('view3d').dataset.rendered = '1';
    const total = performance.now() - t0;
    const tt = $('timings').querySelector('tbody');
    for (const [k, v] of Object.entries(res.timings_ms || {})) row(tt, ['server ' + k, v.toFixed(1) + ' ms']);
    row(tt, ['POST /v1/predict?format=all (one job)', r.ms.toFixed(0) + ' ms']);
    row(tt, ['photo to result, in this page', total.toFixed(0) + ' ms']);
    $('status').dataset.ms = total.toFixed(0);
    const none = hands.length === 0 && res.boxes === 'detected' ? ' The detector found no hand in this photo.' : '';
    setStatus('done', `Done: ${hands.length} hand(s) in ${(total / 1000).toFixed(2)} s.${none}`);
  } catch (e) {
    resetResult();                      // nothing stale stays on screen
    setStatus('error', e.message);
  } finally {
    $('run').disabled = !file;
    $('status').dataset.runs = String(++runs);
  }
}

// ---- the photo ----

async function pick(f) {
  if (!f) return;
  const t0 = performance.now();
  stopLive();
  setStatus('busy', 'Reading the photo…');
  resetResult();
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
    // not an image the browser reads (TIFF in most browsers): the server decodes it, or says why not
  }
  await run(t0);
}

async function pickExample(src) {
  setStatus('busy', 'Loading the example…');
  try {
    const resp = await fetch(src);
    if (!resp.ok) throw new Error(`HTTP ${resp.status}`);
    const blob = await resp.blob();
    await pick(new File([blob], src.split('/').pop(), { type: blob.type || 'image/jpeg' }));
  } catch (e) {
    setStatus('error', `cannot load the example ${src}: ${e.message}`);
    $('status').dataset.runs = String(++runs);
  }
}

// ---- live: the webcam or a video file ----

const live = { running: false, run: 0, stream: null, faces: null, group: null, sent: 0, t0: 0,
               last: null, framed: false, capture: document.createElement('canvas') };

function liveStats(a) {
  const t = $('live-stats').querySelector('tbody');
  t.replaceChildren();
  const secs = (performance.now() - live.t0) / 1000;
  row(t, ['frames sent', `${live.sent} (${(live.sent / Math.max(secs, 1e-3)).toFixed(1)}/s)`]);
  const f = (live.last && live.last.frames) || {}, d = (live.last && live.last.dropped) || {};
  row(t, ['server: captured, tracked, regressed', `${f.captured ?? '–'}, ${f.tracked ?? '–'}, ${f.regressed ?? '–'}`]);
  row(t, ['dropped: waiting, tracker, regressor', `${a.replaced}, ${d.track ?? '–'}, ${d.regress ?? '–'}`]);
  if (live.lastRegressed) row(t, ['latency of the last hands', `${live.lastRegressed.latency_ms.toFixed(0)} ms`]);
  if (a.error) row(t, ['last bad frame', a.error]);
}

// The regressed hands as meshes: vertices + cam_t_full, in the GLB's
// frame (x, -y, -z: the camera looking down -z, y up).
/* The hands table for the newest regressed frame: its track, side, box
 * and tracking score (no show toggles: the next frame replaces them). */
function liveHandRows(hands) {
  $('hand-count').textContent = String(hands.length);
  $('hand-count').dataset.count = String(hands.length);
  const tbody = $('hands').querySelector('tbody');
  tbody.replaceChildren();
  hands.forEach((h) => {
    const score = h.detector_score ?? (h.detection && h.detection.score);
    row(tbody, [h.track_id !== undefined ? `track ${h.track_id}` : '–', h.is_right ? 'right' : 'left',
                (h.bbox || []).map((v) => Math.round(v)).join(', '),
                typeof score === 'number' ? score.toFixed(3) : '–', '–']);
  });
}

function liveMeshes(rec) {
  if (!view.renderer || !live.faces) return;
  if (!live.group) {
    clearModel();
    live.group = new THREE.Group();
    view.scene.add(live.group);
    view.model = live.group;
  }
  const hands = rec.hands.filter((h) => h.vertices);
  while (live.group.children.length > hands.length) {
    const m = live.group.children.pop();
    m.geometry.dispose();
    m.material.dispose();
  }
  hands.forEach((h, i) => {
    let m = live.group.children[i];
    if (!m) {
      const g = new THREE.BufferGeometry();
      g.setAttribute('position', new THREE.BufferAttribute(new Float32Array(778 * 3), 3));
      g.setIndex(live.faces);
      m = new THREE.Mesh(g, new THREE.MeshStandardMaterial({ roughness: 0.6, metalness: 0, side: THREE.DoubleSide }));
      m.frustumCulled = false;
      live.group.add(m);
    }
    m.name = `hand_${i}_${h.is_right ? 'right' : 'left'}`;
    m.material.color.setHex(h.is_right ? RIGHT_COLOUR : LEFT_COLOUR);
    const p = m.geometry.attributes.position.array, t = h.cam_t_full;
    h.vertices.forEach((v, k) => {
      p[3 * k] = v[0] + t[0];
      p[3 * k + 1] = -(v[1] + t[1]);
      p[3 * k + 2] = -(v[2] + t[2]);
    });
    m.geometry.attributes.position.needsUpdate = true;
    m.geometry.computeVertexNormals();
    m.geometry.computeBoundingSphere();
  });
  applyHidden();
  if (!live.framed && hands.length) {
    frame(live.group);
    live.framed = true;
    $('reset-view').disabled = false;
  }
  render();
  $('view3d').dataset.rendered = hands.length ? '1' : $('view3d').dataset.rendered;
}

// The live picture's marks: the newest tracked frame's boxes and
// landmarks, the newest regressed frame's keypoints.
function liveOverlay(video) {
  const c = $('live-overlay');
  const w = video.videoWidth, h = video.videoHeight;
  if (!w || !h) return;
  if (c.width !== w || c.height !== h) { c.width = w; c.height = h; }
  const g = c.getContext('2d');
  g.clearRect(0, 0, w, h);
  const scale = w / live.capture.width;     // the frames sent are scaled to at most 640 wide
  const opts = markOptions();
  if (live.last && live.last.hands) drawMarks(g, live.last.hands, scale, { ...opts, keypoints: false });
  if (live.lastRegressed) drawMarks(g, live.lastRegressed.hands, scale, { ...opts, boxes: false, labels: false });
}

// One loop per run: a loop whose run was stopped (and maybe another started
// while its request was out) ends at its next step, its answer unused, and
// then ends its session: never while its own request is out (that request
// would find the session gone).
async function liveLoop(video, run) {
  const current = () => live.running && live.run === run;
  let session = null;
  while (current()) {
    if (video.readyState < 2 || !video.videoWidth) {
      await new Promise((r) => setTimeout(r, 30));
      continue;
    }
    const cw = Math.min(640, video.videoWidth), ch = Math.round(video.videoHeight * cw / video.videoWidth);
    live.capture.width = cw;
    live.capture.height = ch;
    live.capture.getContext('2d').drawImage(video, 0, 0, cw, ch);
    const blob = await new Promise((r) => live.capture.toBlob(r, 'image/jpeg', 0.85));
    if (!current()) break;                // stopped meanwhile: the session is ended
    const q = session ? `session=${session}` : detectorQuery().join('&');
    let r, a = null;
    try {
      r = await request('/v1/live?' + q, blob, 'image/jpeg');
      if (r.status === 200) a = await r.resp.json();
    } catch (e) {
      if (current()) setStatus('error', e.message);
      break;
    }
    if (a && !session) session = a.session;   // ended below even when stopped meanwhile
    if (!current()) break;
    if (!a) {
      setStatus('error', apiError(r.status, await r.resp.text()));
      break;
    }
    live.sent++;
    if (a.faces) {
      live.faces = a.faces;
      setStatus('busy', 'Live: the hands follow the frames (Stop to end).');
    }
    if (a.tracked) live.last = a.tracked;
    if (a.regressed) {
      live.lastRegressed = a.regressed;
      liveMeshes(a.regressed);
      liveHandRows(a.regressed.hands);
    }
    if (a.failed) {
      setStatus('error', 'the live session stopped: ' + a.failed);
      break;
    }
    liveOverlay(video);
    liveStats(a);
    document.body.dataset.liveFrames = String(live.sent);
    document.body.dataset.liveRegressed = String((live.last && live.last.frames && live.last.frames.regressed) || 0);
    document.body.dataset.liveTracked = String((live.last && live.last.hands && live.last.hands.length) || 0);
  }
  if (session) fetch(`/v1/live?session=${session}&end=1`, { method: 'POST' }).catch(() => {});
  if (current()) stopLive(true);
}

async function startLive(source) {
  stopLive();
  resetResult();
  const video = $('live-video');
  try {
    if (source === 'camera') {
      live.stream = await navigator.mediaDevices.getUserMedia({ video: { width: { ideal: 640 } }, audio: false });
      video.srcObject = live.stream;
    } else {
      video.srcObject = null;
      video.src = URL.createObjectURL(source);
      urls.push(video.src);
      video.loop = true;
    }
    await video.play();
  } catch (e) {
    setStatus('error', (source === 'camera' ? 'cannot start the webcam: ' : 'cannot play the video: ') + e.message);
    return;
  }
  Object.assign(live, { running: true, run: live.run + 1, sent: 0, t0: performance.now(), last: null, lastRegressed: null,
                        framed: false });
  $('overlay').hidden = true;
  video.hidden = false;
  $('live-overlay').hidden = false;
  $('live-stop').disabled = false;
  setStatus('busy', 'Live: starting a session…');
  liveLoop(video, live.run);
}

// End the session (the server frees it), stop the camera or the video.
function stopLive(keepStatus) {
  if (!live.running && !live.stream) return;
  live.running = false;
  if (live.stream) for (const t of live.stream.getTracks()) t.stop();
  live.stream = null;
  const video = $('live-video');
  video.pause();
  video.hidden = true;
  $('live-overlay').hidden = true;
  $('live-stop').disabled = true;
  if (live.group) {
    clearModel();
    live.group = null;
  }
  if (keepStatus !== true) setStatus('idle', `Live stopped after ${live.sent} frame(s).`);
}

// ---- setup ----

function setMode(mode) {
  for (const b of document.querySelectorAll('.tabs button')) b.setAttribute('aria-selected', String(b.dataset.mode === mode));
  $('photo-input').hidden = mode !== 'photo';
  $('live-input').hidden = mode !== 'live';
  if (mode === 'photo') stopLive();
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
  for (const b of document.querySelectorAll('.example')) b.addEventListener('click', () => pickExample(b.dataset.src));
  $('run').addEventListener('click', () => run());
  for (const id of ['mark-boxes', 'mark-keypoints', 'mark-labels'])
    $(id).addEventListener('change', () => { drawOverlay(); refreshPng(); });
  $('min-score').addEventListener('input', () => { $('min-score-value').textContent = Number($('min-score').value).toFixed(2); });
  for (const b of document.querySelectorAll('.tabs button')) b.addEventListener('click', () => setMode(b.dataset.mode));
  $('live-cam').addEventListener('click', () => startLive('camera'));
  $('live-file').addEventListener('change', () => { if ($('live-file').files[0]) startLive($('live-file').files[0]); });
  $('live-stop').addEventListener('click', () => stopLive());
  window.addEventListener('resize', drawPreview);
  window.addEventListener('pagehide', () => stopLive(true));
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
