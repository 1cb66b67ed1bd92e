#!/usr/bin/env node
// tfjs_ref.js - run a TF.js graph model (model.json + its weight files) with
// TensorFlow.js itself (@tensorflow/tfjs 4.22.0, CPU backend, in node) and
// write the tensors asked for as .npy: the reference the C reader and
// executor (src/tfjs/) are tested against.
//
//   node tfjs_ref.js MODEL.json --input FILE [--feed NODE] --fetch NODE...
//                    --out-dir DIR [--resize H,W] [--nms N,IOU,SCORE]
//   node tfjs_ref.js --serve
//
//   --input FILE  a .npy (float32 or int32, C order), the model's input (or,
//                 with --feed, the value of node NODE: the graph runs from
//                 there, so a stage can be checked on its own input).
//   --resize H,W  first tf.image.resizeBilinear(input, [H, W]) (TF's legacy
//                 sampling, as @vladmandic/human's hand detector does it)
//                 and a cast to int32 (truncation); written as resized.npy.
//   --fetch NODE  a node to output (repeatable; "name" or "name:k"), written
//                 as DIR/fetch_<i>.npy (float32 or int32) in order.
//   --nms N,IOU,SCORE  on the last two fetches (boxes [1,A,1,4] or [1,A,4],
//                 scores [1,A,C]): tf.image.nonMaxSuppression on the boxes and the
//                 per-anchor max over the score columns but the 5th (the
//                 face class, dropped as human's handtrack.ts does), at most
//                 N, IoU IOU, min score SCORE -> DIR/nms.npy (int32 indices
//                 in order) and DIR/max.npy.
//   --serve       many runs in one process: one JSON request per stdin line
//                 {"model", "input", "feed"?, "fetch": [...], "out_dir",
//                 "resize"?: [H, W], "nms"?: [N, IOU, SCORE]}; one JSON
//                 reply per line, {"ok": true} or {"error": MSG}.
//
// The model is loaded from memory (tf.io.fromMemory: the JSON's
// modelTopology, weightsManifest[].weights and the concatenated weight
// files), so no network or file URL handler is involved.
//
// Install once: (cd tests/tfjs && npm ci --ignore-scripts --legacy-peer-deps)
'use strict';
const fs = require('fs');
const path = require('path');

let tf;
try {
  tf = require('@tensorflow/tfjs');
} catch (e) {
  process.stderr.write(`tfjs_ref: @tensorflow/tfjs is not installed (cd tests/tfjs && npm ci --ignore-scripts --legacy-peer-deps): ${e.message}\n`);
  process.exit(1);
}

function usage(msg) {
  process.stderr.write(`tfjs_ref: ${msg}\nusage: node tfjs_ref.js MODEL.json --input FILE [--feed NODE] --fetch NODE... --out-dir DIR [--resize H,W] [--nms N,IOU,SCORE] | --serve\n`);
  process.exit(2);
}

function readNpy(file) {
  const b = fs.readFileSync(file);
  if (b.length < 10 || b.toString('latin1', 0, 6) !== '\x93NUMPY') throw new Error(`${file}: not a .npy file`);
  const major = b[6];
  const hlen = major === 1 ? b.readUInt16LE(8) : b.readUInt32LE(8);
  const hstart = major === 1 ? 10 : 12;
  const header = b.toString('latin1', hstart, hstart + hlen);
  const descr = /'descr':\s*'([^']*)'/.exec(header);
  const fortran = /'fortran_order':\s*(True|False)/.exec(header);
  const shape = /'shape':\s*\(([^)]*)\)/.exec(header);
  if (!descr || !fortran || !shape) throw new Error(`${file}: bad .npy header`);
  if (fortran[1] === 'True') throw new Error(`${file}: fortran_order arrays are not supported`);
  const dims = shape[1].split(',').map((x) => x.trim()).filter((x) => x.length).map(Number);
  const n = dims.reduce((p, x) => p * x, 1);
  const off = hstart + hlen;
  if (descr[1] !== '<f4' && descr[1] !== '<i4') throw new Error(`${file}: dtype ${descr[1]} not supported (float32, int32)`);
  if (b.length - off !== n * 4) throw new Error(`${file}: ${b.length - off} data bytes, expected ${n * 4}`);
  const copy = new Uint8Array(b.subarray(off)).buffer;
  return { values: descr[1] === '<f4' ? new Float32Array(copy) : new Int32Array(copy), shape: dims,
           dtype: descr[1] === '<f4' ? 'float32' : 'int32' };
}

function writeNpy(file, typed, shape) {
  const descr = typed instanceof Int32Array ? '<i4' : '<f4';
  const shp = shape.length === 1 ? `(${shape[0]},)` : `(${shape.join(', ')})`;
  let header = `{'descr': '${descr}', 'fortran_order': False, 'shape': ${shp}, }`;
  const pad = 64 - ((10 + header.length + 1) % 64);
  header += ' '.repeat(pad % 64) + '\n';
  const head = Buffer.alloc(10);
  head.write('\x93NUMPY', 0, 'latin1');
  head[6] = 1;
  head[7] = 0;
  head.writeUInt16LE(header.length, 8);
  const data = Buffer.from(typed.buffer, typed.byteOffset, typed.byteLength);
  fs.writeFileSync(file, Buffer.concat([head, Buffer.from(header, 'latin1'), data]));
}

const models = new Map();

async function loadModel(file) {
  if (models.has(file)) return models.get(file);
  const j = JSON.parse(fs.readFileSync(file, 'utf8'));
  const dir = path.dirname(file);
  const specs = [];
  const parts = [];
  for (const group of j.weightsManifest) {
    for (const w of group.weights) specs.push(w);
    for (const p of group.paths) parts.push(fs.readFileSync(path.join(dir, p)));
  }
  const all = Buffer.concat(parts);
  const weightData = all.buffer.slice(all.byteOffset, all.byteOffset + all.byteLength);
  const m = await tf.loadGraphModel(tf.io.fromMemory({ modelTopology: j.modelTopology, weightSpecs: specs, weightData }));
  models.set(file, m);
  return m;
}

async function run(q) {
  const m = await loadModel(q.model);
  const x = readNpy(q.input);
  fs.mkdirSync(q.out_dir, { recursive: true });
  let input = tf.tensor(x.values, x.shape, x.dtype);
  if (q.resize) {
    const r = tf.image.resizeBilinear(input, q.resize);
    const c = tf.cast(r, 'int32');
    tf.dispose([input, r]);
    input = c;
    writeNpy(path.join(q.out_dir, 'resized.npy'), new Int32Array(await input.data()), input.shape);
  }
  const feed = q.feed ? { [q.feed]: input } : input;
  let outs = await m.executeAsync(feed, q.fetch);
  if (!Array.isArray(outs)) outs = [outs];
  for (let i = 0; i < outs.length; i++) {
    const d = await outs[i].data();
    const typed = d instanceof Int32Array ? new Int32Array(d) : new Float32Array(d);
    writeNpy(path.join(q.out_dir, `fetch_${i}.npy`), typed, outs[i].shape);
  }
  if (q.nms) {
    if (outs.length < 2) throw new Error('--nms needs two fetches last: boxes, scores');
    const [boxesT, scoresT] = outs.slice(-2);
    const boxes = tf.reshape(boxesT, [-1, 4]);
    const scores = tf.reshape(scoresT, [boxes.shape[0], -1]);
    const cols = tf.unstack(scores, 1);
    cols.splice(4, 1);
    const kept = tf.stack(cols, 1);
    const max = tf.max(kept, 1);
    const nms = tf.image.nonMaxSuppression(boxes, max, q.nms[0], q.nms[1], q.nms[2]);
    writeNpy(path.join(q.out_dir, 'nms.npy'), new Int32Array(await nms.data()), nms.shape);
    writeNpy(path.join(q.out_dir, 'max.npy'), new Float32Array(await max.data()), max.shape);
    tf.dispose([boxes, scores, kept, max, nms, ...cols]);
  }
  tf.dispose([input, ...outs]);
}

function parseArgs(argv) {
  const q = { model: null, input: null, feed: null, fetch: [], out_dir: null, resize: null, nms: null, serve: false };
  for (let i = 0; i < argv.length; i++) {
    const s = argv[i];
    const next = () => {
      if (i + 1 >= argv.length) usage(`${s} needs a value`);
      return argv[++i];
    };
    if (s === '--input') q.input = next();
    else if (s === '--feed') q.feed = next();
    else if (s === '--fetch') q.fetch.push(next());
    else if (s === '--out-dir') q.out_dir = next();
    else if (s === '--resize') q.resize = next().split(',').map(Number);
    else if (s === '--nms') q.nms = next().split(',').map(Number);
    else if (s === '--serve') q.serve = true;
    else if (s.startsWith('--')) usage(`unknown option ${s}`);
    else if (q.model === null) q.model = s;
    else usage(`unexpected argument ${s}`);
  }
  if (q.serve) return q;
  if (!q.model || !q.input || !q.out_dir || !q.fetch.length) usage('MODEL.json, --input, --fetch and --out-dir are needed');
  if (q.resize && (q.resize.length !== 2 || !q.resize.every((v) => v >= 1))) usage('--resize H,W');
  if (q.nms && q.nms.length !== 3) usage('--nms N,IOU,SCORE');
  return q;
}

async function serve() {
  const rl = require('readline').createInterface({ input: process.stdin, terminal: false });
  for await (const line of rl) {
    let reply;
    try {
      const q = JSON.parse(line);
      if (typeof q.model !== 'string' || typeof q.input !== 'string' || typeof q.out_dir !== 'string' ||
          !Array.isArray(q.fetch) || !q.fetch.length)
        throw new Error('a request needs "model", "input", "out_dir" (strings) and "fetch" (a non-empty array)');
      await run(q);
      reply = { ok: true };
    } catch (e) {
      reply = { error: e && e.message ? e.message : String(e) };
    }
    process.stdout.write(JSON.stringify(reply) + '\n');
  }
}

(async () => {
  await tf.setBackend('cpu');
  const q = parseArgs(process.argv.slice(2));
  if (q.serve) return serve();
  try {
    await run(q);
  } catch (e) {
    process.stderr.write(`tfjs_ref: ${e && e.message ? e.message : e}\n`);
    process.exit(1);
  }
})();
