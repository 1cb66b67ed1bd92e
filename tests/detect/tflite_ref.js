#!/usr/bin/env node
// tflite_ref.js - run a .tflite model with the real TFLite runtime (the
// WebAssembly build in @tensorflow/tfjs-tflite, XNNPACK delegate on) and
// write its outputs as .npy: the reference the C executor is tested against.
//
//   node tflite_ref.js MODEL.tflite [--input FILE]... [--out-dir DIR]
//                      [--threads N] [--info] [--time N]
//   node tflite_ref.js --serve [--threads N]
//
//   --input FILE   one per graph input, in order: a .npy (float32/float64/
//                  int32, C order, element count equal to the input's; the
//                  shape itself is not checked) or a raw little-endian
//                  float32 file of exactly the input's size. Inputs not
//                  given are zero.
//   --out-dir DIR  write output i to DIR/output_<i>.npy (float32, or int32
//                  for int32 outputs), shaped as the runtime reports.
//   --info         print the inputs/outputs (name, dtype, shape) as JSON and
//                  run nothing unless --out-dir is given too.
//   --time N       also run N more times and print the median ms per Infer.
//   --serve        many inferences in one process, requests on stdin (see
//                  serve() below): the tests' way, one start for a whole file.
//
// stdout: one JSON object {inputs, outputs[, median_ms]}. Errors: a message
// on stderr and exit status 1 (2 for bad usage).
//
// Install once: (cd tests/detect && npm install --ignore-scripts --legacy-peer-deps)
'use strict';
const fs = require('fs');
const path = require('path');

const WASM_DIR = path.join(__dirname, 'node_modules', '@tensorflow', 'tfjs-tflite', 'wasm');

function usage(msg) {
  process.stderr.write(`tflite_ref: ${msg}\nusage: node tflite_ref.js MODEL.tflite [--input FILE]... [--out-dir DIR] [--threads N] [--info] [--time N] | --serve [--threads N]\n`);
  process.exit(2);
}

function fail(msg) {
  process.stderr.write(`tflite_ref: ${msg}\n`);
  process.exit(1);
}

function parseArgs(argv) {
  const a = { model: null, inputs: [], outDir: null, threads: 1, info: false, time: 0, serve: false };
  for (let i = 0; i < argv.length; i++) {
    const s = argv[i];
    const next = () => {
      if (i + 1 >= argv.length) usage(`${s} needs a value`);
      return argv[++i];
    };
    if (s === '--input') a.inputs.push(next());
    else if (s === '--out-dir') a.outDir = next();
    else if (s === '--threads') a.threads = parseInt(next(), 10);
    else if (s === '--time') a.time = parseInt(next(), 10);
    else if (s === '--info') a.info = true;
    else if (s === '--serve') a.serve = true;
    else if (s.startsWith('--')) usage(`unknown option ${s}`);
    else if (a.model === null) a.model = s;
    else usage(`unexpected argument ${s}`);
  }
  if (a.model === null && !a.serve) usage('no model given');
  if (a.serve && (a.model !== null || a.inputs.length || a.outDir || a.info || a.time)) usage('--serve takes only --threads');
  if (!(a.threads >= 1) || !(a.time >= 0)) usage('--threads must be >= 1 and --time >= 0');
  return a;
}

// A .npy file's data as a Float64Array of its values (any float32/float64/
// int32 little-endian C-order array), with its shape.
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
  const sizes = { '<f4': 4, '<f8': 8, '<i4': 4 };
  const es = sizes[descr[1]];
  if (!es) throw new Error(`${file}: dtype ${descr[1]} not supported (float32, float64, int32)`);
  if (b.length - off !== n * es) throw new Error(`${file}: ${b.length - off} data bytes, expected ${n * es}`);
  const out = new Float64Array(n);
  for (let i = 0; i < n; i++) {
    const p = off + i * es;
    out[i] = descr[1] === '<f4' ? b.readFloatLE(p) : descr[1] === '<f8' ? b.readDoubleLE(p) : b.readInt32LE(p);
  }
  return { values: out, shape: dims };
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

function describe(t) {
  return { name: t.name, dtype: t.dataType, shape: String(t.shape).split(',').filter((x) => x.length).map(Number) };
}

function vectorToArray(v) {
  const out = [];
  for (let i = 0; i < v.size(); i++) out.push(v.get(i));
  return out;
}

function fill(tensor, file) {
  const view = tensor.data();
  let values;
  if (file.endsWith('.npy')) values = readNpy(file).values;
  else {
    const b = fs.readFileSync(file);
    if (b.length !== view.length * 4) throw new Error(`${file}: ${b.length} bytes, input '${tensor.name}' needs ${view.length * 4} (raw float32)`);
    values = new Float32Array(b.buffer, b.byteOffset, view.length);
  }
  if (values.length !== view.length) throw new Error(`${file}: ${values.length} values, input '${tensor.name}' has ${view.length}`);
  for (let i = 0; i < view.length; i++) view[i] = values[i];
}

// One runner per model file (created on first use): the WebAssembly module is
// compiled once per process, which is most of a one-shot run's time.
async function runtimeModule() {
  let factory;
  try {
    factory = require(path.join(WASM_DIR, 'tflite_web_api_cc.js'));
  } catch (e) {
    fail(`cannot load the TFLite runtime from ${WASM_DIR} (run: cd tests/detect && npm install --ignore-scripts --legacy-peer-deps): ${e.message}`);
  }
  const wasm = fs.readFileSync(path.join(WASM_DIR, 'tflite_web_api_cc.wasm'));
  // The runtime prints an INFO line about its delegate; keep stdout JSON only.
  return factory({ wasmBinary: wasm, print: (s) => process.stderr.write(s + '\n'), printErr: (s) => process.stderr.write(s + '\n') });
}

function createRunner(mod, model, threads) {
  const bytes = fs.readFileSync(model);
  const ptr = mod._malloc(bytes.length);
  mod.HEAPU8.set(bytes, ptr);
  const res = mod.TFLiteWebModelRunner.CreateFromBufferAndOptions(ptr, bytes.length, {
    numThreads: threads, enableProfiling: false, maxProfilingBufferEntries: 1024,
  });
  if (!res.ok()) throw new Error(`${model}: ${res.errorMessage()}`);
  const runner = res.value();
  return { runner, inputs: vectorToArray(runner.GetInputs()), outputs: vectorToArray(runner.GetOutputs()) };
}

// Fill the inputs from files (the rest zero), infer, write the outputs to
// outDir (when given). Throws on any bad input.
function inferOnce(r, files, outDir) {
  if (files.length > r.inputs.length) throw new Error(`${files.length} inputs given, the model has ${r.inputs.length}`);
  r.inputs.forEach((t, i) => {
    if (t.dataType !== 'float32') throw new Error(`input ${i} ('${t.name}') is ${t.dataType}; only float32 inputs are filled`);
    if (i < files.length) fill(t, files[i]);
    else t.data().fill(0);
  });
  if (!r.runner.Infer()) throw new Error('Infer() failed');
  if (outDir) {
    fs.mkdirSync(outDir, { recursive: true });
    r.outputs.forEach((t, i) => {
      const d = t.data();
      const copy = d instanceof Int32Array ? new Int32Array(d) : new Float32Array(d);
      writeNpy(path.join(outDir, `output_${i}.npy`), copy, describe(t).shape);
    });
  }
}

// --serve: one request per stdin line, {"model": M, "inputs": [FILE...],
// "out_dir": D}; one reply per stdout line, {"outputs": N} or {"error": MSG}.
// A bad request gets its error and the process goes on; it exits when stdin
// closes.
async function serve(threads) {
  const mod = await runtimeModule();
  const runners = new Map();
  const rl = require('readline').createInterface({ input: process.stdin, terminal: false });
  for await (const line of rl) {
    let reply;
    try {
      const q = JSON.parse(line);
      if (typeof q.model !== 'string' || !Array.isArray(q.inputs) || typeof q.out_dir !== 'string')
        throw new Error('a request needs "model" (string), "inputs" (array) and "out_dir" (string)');
      if (!runners.has(q.model)) runners.set(q.model, createRunner(mod, q.model, threads));
      const r = runners.get(q.model);
      inferOnce(r, q.inputs, q.out_dir);
      reply = { outputs: r.outputs.length };
    } catch (e) {
      reply = { error: e && e.message ? e.message : String(e) };
    }
    process.stdout.write(JSON.stringify(reply) + '\n');
  }
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  if (args.serve) return serve(args.threads);
  const mod = await runtimeModule();
  let r;
  try {
    r = createRunner(mod, args.model, args.threads);
  } catch (e) {
    fail(e.message);
  }
  const report = { inputs: r.inputs.map(describe), outputs: r.outputs.map(describe) };
  if (args.info && !args.outDir) {
    process.stdout.write(JSON.stringify(report) + '\n');
    return;
  }
  try {
    inferOnce(r, args.inputs, args.outDir);
  } catch (e) {
    fail(e.message);
  }
  if (args.time > 0) {
    const ms = [];
    for (let k = 0; k < args.time; k++) {
      const t0 = process.hrtime.bigint();
      r.runner.Infer();
      ms.push(Number(process.hrtime.bigint() - t0) / 1e6);
    }
    ms.sort((x, y) => x - y);
    report.median_ms = ms[ms.length >> 1];
  }
  process.stdout.write(JSON.stringify(report) + '\n');
}

main().catch((e) => fail(e && e.message ? e.message : String(e)));
