// ort_time.js - time the exported HaMeR ONNX model with onnxruntime-node (CPU EP, fp32).
//
//   node bench/peers/ort_time.js --model M.onnx --input crop.f32 [--threads 2]
//        [--warmup 2] [--iters 10] [--outdir DIR]
//
// --input: raw little-endian float32 [1,3,256,192] (normalised crop).
// Prints one JSON object: per-iteration seconds, session creation time and
// RSS; with --outdir, writes the outputs as raw float32 (<name>.f32) for the
// cross-check against the other runtimes.
'use strict';
const fs = require('fs');
const path = require('path');

function parseArgs(argv) {
  const a = {threads: 2, warmup: 2, iters: 10, outdir: null, model: null, input: null};
  for (let i = 0; i < argv.length; i += 2) {
    const k = argv[i].replace(/^--/, ''), v = argv[i + 1];
    if (!(k in a) || v === undefined) throw new Error(`bad option ${argv[i]}`);
    a[k] = ['threads', 'warmup', 'iters'].includes(k) ? parseInt(v, 10) : v;
  }
  if (!a.model || !a.input) throw new Error('--model and --input are required');
  return a;
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  let ort;
  try {
    ort = require('onnxruntime-node');
  } catch (e) {
    // The native binding (bin/napi-v*/linux/x64) ships in the npm tarball;
    // say exactly what failed if it does not load.
    console.error(`onnxruntime-node failed to load: ${e.message}`);
    process.exit(3);
  }
  const buf = fs.readFileSync(args.input);
  const data = new Float32Array(buf.buffer, buf.byteOffset, buf.byteLength / 4);
  if (data.length !== 3 * 256 * 192) throw new Error(`${args.input}: expected 147456 floats, got ${data.length}`);
  const t0 = process.hrtime.bigint();
  const session = await ort.InferenceSession.create(args.model, {
    executionProviders: ['cpu'],
    intraOpNumThreads: args.threads,
    interOpNumThreads: 1,
    executionMode: 'sequential',
    graphOptimizationLevel: 'all',
  });
  const createS = Number(process.hrtime.bigint() - t0) / 1e9;
  const feeds = {crops: new ort.Tensor('float32', data, [1, 3, 256, 192])};
  let out;
  for (let i = 0; i < args.warmup; i++) out = await session.run(feeds);
  const times = [];
  for (let i = 0; i < args.iters; i++) {
    const a = process.hrtime.bigint();
    out = await session.run(feeds);
    times.push(Number(process.hrtime.bigint() - a) / 1e9);
  }
  if (args.outdir) {
    fs.mkdirSync(args.outdir, {recursive: true});
    for (const name of session.outputNames) {
      const d = out[name].data;
      fs.writeFileSync(path.join(args.outdir, `${name}.f32`), Buffer.from(d.buffer, d.byteOffset, d.byteLength));
    }
  }
  const rss = fs.readFileSync('/proc/self/status', 'utf8').match(/VmHWM:\s+(\d+)/);
  console.log(JSON.stringify({
    runtime: 'onnxruntime-node',
    version: ort.env.versions ? ort.env.versions.node : null,
    threads: args.threads,
    warmup: args.warmup,
    iters: args.iters,
    session_create_s: createS,
    times_s: times,
    peak_rss_mb: rss ? parseInt(rss[1], 10) / 1024 : null,
    outputs: session.outputNames,
  }));
}

main().catch((e) => {
  console.error(`ort_time.js: ${e.message}`);
  process.exit(1);
});
