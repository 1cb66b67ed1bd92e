// skin.mjs GLB [TIME] - evaluate a GLB's skins from the file alone (glTF-Transform
// reads it; the math is glTF 2.0's skinning: joint matrix = world(joint) x
// inverse bind matrix, vertex = sum of the 4 weighted joint matrices applied
// to the bind position plus the weighted morph targets). Prints JSON:
// {"validator": {errors, warnings, infos, hints, messages},
//  "hands": [{"name", "vertices": [[x,y,z]...], "keypoints": {name: [x,y,z]}}]}
// in the file's world frame. With TIME, every animation channel first sets
// its node to the sampler's key at that time (the key nearest to it; the
// tests ask for the frames' times), and hands whose scale is then 0 are
// left out.
import fs from 'fs';
import validator from 'gltf-validator';
import { NodeIO } from '@gltf-transform/core';

const bytes = new Uint8Array(fs.readFileSync(process.argv[2]));
const report = await validator.validateBytes(bytes, { maxIssues: 1000 });
const doc = await new NodeIO().readBinary(bytes);
const root = doc.getRoot();

function mul(a, b) { // column-major 4x4
  const o = new Array(16).fill(0);
  for (let c = 0; c < 4; c++)
    for (let r = 0; r < 4; r++)
      for (let k = 0; k < 4; k++) o[4 * c + r] += a[4 * k + r] * b[4 * c + k];
  return o;
}
function apply(m, p) {
  return [0, 1, 2].map((r) => m[r] * p[0] + m[4 + r] * p[1] + m[8 + r] * p[2] + m[12 + r]);
}
const time = process.argv[3] === undefined ? null : Number(process.argv[3]);
if (time !== null) {
  for (const anim of root.listAnimations()) {
    for (const ch of anim.listChannels()) {
      const smp = ch.getSampler(), input = smp.getInput().getArray(), out = smp.getOutput();
      let k = 0;
      for (let i = 0; i < input.length; i++) if (Math.abs(input[i] - time) < Math.abs(input[k] - time)) k = i;
      if (smp.getInterpolation() === 'STEP') { // the last key at or before the time
        k = 0;
        for (let i = 0; i < input.length; i++) if (input[i] <= time + 1e-6) k = i;
      }
      const v = out.getElement(k, []), node = ch.getTargetNode(), path = ch.getTargetPath();
      if (path === 'rotation') node.setRotation(v);
      else if (path === 'translation') node.setTranslation(v);
      else if (path === 'scale') node.setScale(v);
    }
  }
}
const world = new Map();
function worldOf(node) {
  if (world.has(node)) return world.get(node);
  const parent = node.getParentNode();
  const m = parent ? mul(worldOf(parent), node.getMatrix()) : node.getMatrix();
  world.set(node, m);
  return m;
}
const hands = [];
for (const node of root.listNodes()) {
  const mesh = node.getMesh(), skin = node.getSkin();
  if (!mesh || !skin) continue;
  const hidden = skin.getSkeleton() && skin.getSkeleton().getScale()[0] === 0;
  if (hidden) continue;
  const joints = skin.listJoints();
  const ibm = skin.getInverseBindMatrices();
  const jm = joints.map((j, i) => mul(worldOf(j), ibm.getElement(i, [])));
  const prim = mesh.listPrimitives()[0];
  const pos = prim.getAttribute('POSITION'), J = prim.getAttribute('JOINTS_0'), W = prim.getAttribute('WEIGHTS_0');
  const targets = prim.listTargets(), tw = mesh.getWeights();
  hands.push({ name: node.getName(), root: skin.getSkeleton().getName(), vertices: null, keypoints: null });
  const verts = [];
  for (let v = 0; v < pos.getCount(); v++) {
    const p = pos.getElement(v, []);
    targets.forEach((t, k) => {
      const d = t.getAttribute('POSITION').getElement(v, []);
      for (let c = 0; c < 3; c++) p[c] += tw[k] * d[c];
    });
    const ji = J.getElement(v, []), wi = W.getElement(v, []);
    const out = [0, 0, 0];
    for (let s = 0; s < 4; s++) {
      if (!wi[s]) continue;
      const q = apply(jm[ji[s]], p);
      for (let c = 0; c < 3; c++) out[c] += wi[s] * q[c];
    }
    verts.push(out);
  }
  const keypoints = {};
  for (const n of root.listNodes()) {
    const name = n.getName();
    if (name.startsWith(node.getName().replace(/_mesh$/, '_kp'))) keypoints[name] = apply(worldOf(n), [0, 0, 0]);
  }
  Object.assign(hands[hands.length - 1], { vertices: verts, keypoints });
}
const { numErrors, numWarnings, numInfos, numHints, messages } = report.issues;
console.log(JSON.stringify({ validator: { errors: numErrors, warnings: numWarnings, infos: numInfos, hints: numHints,
  messages: messages.filter((m) => m.severity < 2) }, hands }));
