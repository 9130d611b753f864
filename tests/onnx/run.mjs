// Runs an ONNX file exported by cdigits (docs/inference.md, "ONNX export") in ONNX
// Runtime on a batch of images and prints one JSON object:
//   {"output": NAME, "dims": [...], "probs": [[...] per image], "inputs": [the files]}
//
//   node tests/onnx/run.mjs MODEL.onnx --shape CxHxW IMAGE.png...
//   node tests/onnx/run.mjs MODEL.onnx --shape CxHxW --raw FILE...
//
// A PNG (8-bit gray or RGB, not interlaced) must already be at the dataset's size, the
// caller having resized it with the dataset's resize mode; its pixels go in as 0-255
// floats, channel-planar. A raw FILE is C*H*W little-endian float32 values. All images
// run as one batch (the graph's batch dimension is symbolic).
import { readFileSync } from 'node:fs';
import { inflateSync } from 'node:zlib';
import * as ort from 'onnxruntime-node';

function fail(msg) {
  process.stderr.write(`run.mjs: ${msg}\n`);
  process.exit(1);
}

// The pixels of a PNG as { c, h, w, data: Uint8Array (h, w, c) }.
function decodePng(path) {
  const buf = readFileSync(path);
  if (buf.readUInt32BE(0) !== 0x89504e47) fail(`${path} is not a PNG`);
  let off = 8, w = 0, h = 0, depth = 0, type = 0, interlace = 0;
  const idat = [];
  while (off < buf.length) {
    const len = buf.readUInt32BE(off), kind = buf.toString('latin1', off + 4, off + 8);
    const body = buf.subarray(off + 8, off + 8 + len);
    if (kind === 'IHDR') {
      w = body.readUInt32BE(0); h = body.readUInt32BE(4);
      depth = body[8]; type = body[9]; interlace = body[12];
    } else if (kind === 'IDAT') {
      idat.push(body);
    }
    off += 12 + len;
  }
  const channels = { 0: 1, 2: 3, 4: 2, 6: 4 }[type];
  if (depth !== 8 || !channels || interlace) fail(`${path}: only 8-bit gray, gray+alpha, RGB or RGBA PNGs without interlacing are read`);
  const raw = inflateSync(Buffer.concat(idat));
  const stride = w * channels, out = new Uint8Array(h * stride);
  for (let y = 0; y < h; y++) {
    const filter = raw[y * (stride + 1)];
    const line = raw.subarray(y * (stride + 1) + 1, (y + 1) * (stride + 1));
    for (let x = 0; x < stride; x++) {
      const a = x >= channels ? out[y * stride + x - channels] : 0;
      const b = y > 0 ? out[(y - 1) * stride + x] : 0;
      const c = x >= channels && y > 0 ? out[(y - 1) * stride + x - channels] : 0;
      let v = line[x];
      if (filter === 1) v += a;
      else if (filter === 2) v += b;
      else if (filter === 3) v += (a + b) >> 1;
      else if (filter === 4) {
        const p = a + b - c, pa = Math.abs(p - a), pb = Math.abs(p - b), pc = Math.abs(p - c);
        v += pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
      }
      out[y * stride + x] = v & 255;
    }
  }
  return { c: channels, h, w, data: out };
}

const args = process.argv.slice(2);
const model = args.shift();
let shape = null, raw = false;
const inputs = [];
while (args.length) {
  const a = args.shift();
  if (a === '--shape') shape = args.shift().split('x').map(Number);
  else if (a === '--raw') raw = true;
  else inputs.push(a);
}
if (!model || !shape || shape.length !== 3 || !inputs.length)
  fail('usage: node run.mjs MODEL.onnx --shape CxHxW (IMAGE.png... | --raw FILE...)');
const [C, H, W] = shape, per = C * H * W;
const batch = new Float32Array(per * inputs.length);
inputs.forEach((path, i) => {
  if (raw) {
    const b = readFileSync(path);
    if (b.length !== per * 4) fail(`${path} has ${b.length} bytes, not ${per * 4} (${C}x${H}x${W} float32)`);
    for (let k = 0; k < per; k++) batch[i * per + k] = b.readFloatLE(k * 4);
    return;
  }
  const img = decodePng(path);
  if (img.h !== H || img.w !== W) fail(`${path} is ${img.w}x${img.h}; resize it to the dataset's ${W}x${H} first`);
  const keep = img.c >= 3 ? 3 : 1; // alpha dropped
  if (keep !== C) fail(`${path} has ${keep} colour channel(s) but the model takes ${C}`);
  for (let ch = 0; ch < C; ch++)
    for (let p = 0; p < H * W; p++) batch[i * per + ch * H * W + p] = img.data[p * img.c + ch];
});

const session = await ort.InferenceSession.create(model);
const name = session.outputNames[0];
const result = await session.run({ data: new ort.Tensor('float32', batch, [inputs.length, C, H, W]) });
const out = result[name], n = out.data.length / inputs.length;
const probs = [];
for (let i = 0; i < inputs.length; i++) probs.push(Array.from(out.data.subarray(i * n, (i + 1) * n)));
process.stdout.write(JSON.stringify({ output: name, dims: out.dims, probs, inputs }) + '\n');
