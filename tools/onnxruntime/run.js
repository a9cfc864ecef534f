#!/usr/bin/env node
// Runs an ONNX model on ONNX Runtime's CPU provider: Tessera's differential reference.
//
// usage: node tools/onnxruntime/run.js MODEL.onnx OUT_DIR NAME=FILE [NAME=FILE...]
//
// Inputs are tensors as .npy (float32, int64, int32 or bool) or float ONNX TensorProto .pb files; each output of the model is
// written to OUT_DIR/<output name>.npy (float32, C order). Prints one line per output with its dims.
// Exit 1 with a message naming the file on bad input; 2 when onnxruntime-node is not installed.
'use strict';
const fs = require('fs');
const path = require('path');

function fail(message, code = 1) {
  process.stderr.write(`run.js: ${message}\n`);
  process.exit(code);
}

let ort;
try {
  ort = require('onnxruntime-node');
} catch (e) {
  fail(`onnxruntime-node is not installed in ${__dirname} (${e.message.split('\n')[0]}); run scripts/bootstrap.sh`, 2);
}

// .npy version 1/2/3, C order: float32 ('<f4'), int64 ('<i8', token ids), int32 ('<i4') or bool ('|b1').
const kNpyTypes = {
  '<f4': { type: 'float32', bytes: 4, read: (b, at) => b.readFloatLE(at), make: (n) => new Float32Array(n) },
  '<i8': { type: 'int64', bytes: 8, read: (b, at) => b.readBigInt64LE(at), make: (n) => new BigInt64Array(n) },
  '<i4': { type: 'int32', bytes: 4, read: (b, at) => b.readInt32LE(at), make: (n) => new Int32Array(n) },
  '|b1': { type: 'bool', bytes: 1, read: (b, at) => b[at], make: (n) => new Uint8Array(n) },
};
function readNpy(file) {
  const bytes = fs.readFileSync(file);
  if (bytes.length < 10 || bytes.toString('latin1', 0, 6) !== '\x93NUMPY') fail(`${file}: not a .npy file`);
  const major = bytes[6];
  const headerLength = major === 1 ? bytes.readUInt16LE(8) : bytes.readUInt32LE(8);
  const start = (major === 1 ? 10 : 12) + headerLength;
  const header = bytes.toString('latin1', major === 1 ? 10 : 12, start);
  const descr = header.match(/'descr':\s*'([^']*)'/);
  const kind = descr && kNpyTypes[descr[1]];
  if (!kind) fail(`${file}: only float32 ('<f4'), int64 ('<i8'), int32 ('<i4') and bool ('|b1') arrays are supported; header ${header.trim()}`);
  if (/'fortran_order':\s*True/.test(header)) fail(`${file}: Fortran-ordered arrays are not supported; save it in C order`);
  const shape = header.match(/'shape':\s*\(([^)]*)\)/);
  if (!shape) fail(`${file}: the header has no shape`);
  const dims = shape[1].split(',').map((d) => d.trim()).filter((d) => d.length).map(Number);
  const count = dims.reduce((a, b) => a * b, 1);
  if (bytes.length - start !== count * kind.bytes)
    fail(`${file}: ${bytes.length - start} data bytes for dims [${dims}] (${count * kind.bytes} expected)`);
  const data = kind.make(count);
  for (let i = 0; i < count; ++i) data[i] = kind.read(bytes, start + kind.bytes * i);
  return { dims, data, type: kind.type };
}

// A float TensorProto: dims (1), data_type (2), float_data (4), raw_data (9); other fields skipped.
function readPb(file) {
  const bytes = fs.readFileSync(file);
  let at = 0;
  const varint = () => {
    let value = 0n, shift = 0n;
    for (;;) {
      if (at >= bytes.length) fail(`${file}: truncated TensorProto`);
      const b = bytes[at++];
      value |= BigInt(b & 0x7f) << shift;
      if (!(b & 0x80)) return value;
      shift += 7n;
    }
  };
  const dims = [], floats = [];
  let type = 1, raw = null;
  while (at < bytes.length) {
    const key = Number(varint()), field = key >> 3, wire = key & 7;
    if (wire === 2) {
      const length = Number(varint()), end = at + length;
      if (end > bytes.length) fail(`${file}: truncated TensorProto`);
      if (field === 1) while (at < end) dims.push(Number(varint()));
      else if (field === 4) for (; at < end; at += 4) floats.push(bytes.readFloatLE(at));
      else if (field === 9) raw = bytes.subarray(at, end);
      at = end;
    } else if (wire === 0) {
      const value = Number(varint());
      if (field === 1) dims.push(value);
      else if (field === 2) type = value;
    } else if (wire === 5) {
      if (field === 4) floats.push(bytes.readFloatLE(at));
      at += 4;
    } else if (wire === 1) {
      at += 8;
    } else {
      fail(`${file}: not a TensorProto (wire type ${wire})`);
    }
  }
  if (type !== 1) fail(`${file}: element type ${type}; only float (1) tensors are supported`);
  const count = dims.reduce((a, b) => a * b, 1);
  const data = new Float32Array(count);
  if (raw) {
    if (raw.length !== count * 4) fail(`${file}: ${raw.length} raw bytes for dims [${dims}]`);
    for (let i = 0; i < count; ++i) data[i] = raw.readFloatLE(4 * i);
  } else {
    if (floats.length !== count) fail(`${file}: ${floats.length} values for dims [${dims}]`);
    data.set(floats);
  }
  return { dims, data, type: 'float32' };
}

function writeNpy(file, dims, data) {
  let header = `{'descr': '<f4', 'fortran_order': False, 'shape': (${dims.join(', ')}${dims.length === 1 ? ',' : ''}), }`;
  header += ' '.repeat(63 - ((header.length + 10) % 64)) + '\n';  // the data starts 64-aligned
  const prefix = Buffer.alloc(10);
  prefix.write('\x93NUMPY', 0, 'latin1');
  prefix[6] = 1;
  prefix[7] = 0;
  prefix.writeUInt16LE(header.length, 8);
  const body = Buffer.alloc(data.length * 4);
  for (let i = 0; i < data.length; ++i) body.writeFloatLE(data[i], 4 * i);
  fs.writeFileSync(file, Buffer.concat([prefix, Buffer.from(header, 'latin1'), body]));
}

async function main() {
  const [model, outDir, ...pairs] = process.argv.slice(2);
  if (!model || !outDir) fail('usage: node run.js MODEL.onnx OUT_DIR NAME=FILE [NAME=FILE...]');
  const feeds = {};
  for (const pair of pairs) {
    const eq = pair.indexOf('=');
    if (eq <= 0) fail(`'${pair}': give inputs as NAME=FILE (.npy or .pb)`);
    const name = pair.slice(0, eq), file = pair.slice(eq + 1);
    if (!fs.existsSync(file)) fail(`${file}: no such file (input '${name}')`);
    const tensor = file.endsWith('.npy') ? readNpy(file) : readPb(file);
    feeds[name] = new ort.Tensor(tensor.type, tensor.data, tensor.dims);
  }
  let session;
  try {
    session = await ort.InferenceSession.create(model, { executionProviders: ['cpu'], graphOptimizationLevel: 'disabled' });
  } catch (e) {
    fail(`${model}: ONNX Runtime cannot load it: ${e.message}`);
  }
  for (const name of session.inputNames)
    if (!(name in feeds)) fail(`${model}: input '${name}' is not given (inputs: ${session.inputNames.join(', ')})`);
  const results = await session.run(feeds);
  fs.mkdirSync(outDir, { recursive: true });
  process.stdout.write(`onnxruntime=${require('onnxruntime-node/package.json').version}\n`);
  for (const name of session.outputNames) {
    const tensor = results[name];
    if (tensor.type !== 'float32') fail(`${model}: output '${name}' is ${tensor.type}; only float32 outputs are compared`);
    const file = path.join(outDir, `${name.replace(/[^A-Za-z0-9_.-]/g, '_')}.npy`);
    writeNpy(file, tensor.dims, tensor.data);
    process.stdout.write(`output=${name} dims=[${tensor.dims.join(',')}] file=${file}\n`);
  }
}

main().catch((e) => fail(e.message));
