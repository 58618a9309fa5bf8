// run_ort.js - one model of the suite through ONNX Runtime (onnxruntime-node, CPU), in a
// process of its own:
//
//   node run_ort.js WORK NAME OPSET BATCH [BUDGET_SECONDS]
//
// The same measurements as run_lazylua.lua: a session with intraOpNumThreads 2,
// interOpNumThreads 1 and graphOptimizationLevel "all", calls on NAME_xBATCH.npy: the
// first, then more within the budget (at least 3, at most 200 in all), the match against
// PyTorch's output, the steady time (median of the last 5 calls, never the first) and the
// peak RSS (VmHWM). Prints one line
// "RESULT {json}".
'use strict';
const fs = require('fs');
const path = require('path');
const ort = require('onnxruntime-node');

const MAX_CALLS = 200, MIN_CALLS = 3, STEADY_CALLS = 5;

// A .npy file of little-endian f4 or f8 in C order (what export.py writes), as
// {shape, data: Float32Array}, or Float64Array with `double` (a float64 reference).
function readNpy(file, double) {
  const bytes = fs.readFileSync(file);
  if (bytes.toString('latin1', 1, 6) !== 'NUMPY') throw new Error(`${file}: not a .npy file`);
  const major = bytes[6];
  const headerLength = major === 1 ? bytes.readUInt16LE(8) : bytes.readUInt32LE(8);
  const headerStart = major === 1 ? 10 : 12;
  const header = bytes.toString('latin1', headerStart, headerStart + headerLength);
  const descr = /'descr':\s*'([^']+)'/.exec(header)[1];
  if (/'fortran_order':\s*True/.test(header)) throw new Error(`${file}: Fortran order`);
  const shape = /'shape':\s*\(([^)]*)\)/.exec(header)[1].split(',').filter((s) => s.trim())
    .map(Number);
  const start = headerStart + headerLength;
  const count = shape.reduce((a, b) => a * b, 1);
  const data = double ? new Float64Array(count) : new Float32Array(count);
  if (descr === '<f4') {
    for (let i = 0; i < count; i++) data[i] = bytes.readFloatLE(start + 4 * i);
  } else if (descr === '<f8') {
    for (let i = 0; i < count; i++) data[i] = bytes.readDoubleLE(start + 8 * i);
  } else {
    throw new Error(`${file}: element type ${descr} (expected <f4 or <f8)`);
  }
  return {shape, data};
}

function peakRssMb() {
  const match = /VmHWM:\s*(\d+)/.exec(fs.readFileSync('/proc/self/status', 'latin1'));
  return match ? Number(match[1]) / 1024 : null;
}

function median(values) {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = (sorted.length - 1) / 2;
  return (sorted[Math.floor(middle)] + sorted[Math.ceil(middle)]) / 2;
}

const now = () => Number(process.hrtime.bigint()) / 1e9;

async function main() {
  const [work, name, opset, batch, budgetText] = process.argv.slice(2);
  const budget = Number(budgetText || 15);
  const result = {model: name, opset: Number(opset), batch: Number(batch)};
  try {
    const file = (suffix) => path.join(work, name + suffix);
    const started = now();
    const session = await ort.InferenceSession.create(file(`_op${opset}.onnx`), {
      intraOpNumThreads: 2, interOpNumThreads: 1, graphOptimizationLevel: 'all',
    });
    result.load_seconds = now() - started;
    const x = readNpy(file(`_x${batch}.npy`));
    const expected = readNpy(file(`_y${batch}.npy`));
    const feeds = {[session.inputNames[0]]: new ort.Tensor('float32', x.data, x.shape)};
    const times = [];
    let first, budgetStart;
    while (times.length < MAX_CALLS && (times.length < MIN_CALLS || now() - budgetStart < budget)) {
      const t0 = now();
      const outputs = await session.run(feeds);
      times.push(now() - t0);
      if (budgetStart === undefined) budgetStart = now();
      if (!first) first = outputs[session.outputNames[0]];
    }
    result.calls = times.length;
    result.first_seconds = times[0];
    // Never the first call (the session's warm-up).
    result.steady_seconds = median(times.slice(Math.max(Math.min(1, times.length - 1), times.length - STEADY_CALLS)));
    if (first.data.length !== expected.data.length) {
      throw new Error(`output shape ${first.dims.join('x')}, PyTorch's ${expected.shape.join('x')}`);
    }
    let diff = 0, scale = 0;
    for (let i = 0; i < first.data.length; i++) {
      diff = Math.max(diff, Math.abs(first.data[i] - expected.data[i]));
      scale = Math.max(scale, Math.abs(expected.data[i]));
    }
    result.max_abs_diff = diff;
    result.output_scale = scale;
    result.match = diff / scale;
    // Against PyTorch's float64 run of the same model (export.py --f64), when there is one.
    if (fs.existsSync(file(`_f64_y${batch}.npy`))) {
      const exact = readNpy(file(`_f64_y${batch}.npy`), true);
      let diff64 = 0, scale64 = 0;
      for (let i = 0; i < first.data.length; i++) {
        diff64 = Math.max(diff64, Math.abs(first.data[i] - exact.data[i]));
        scale64 = Math.max(scale64, Math.abs(exact.data[i]));
      }
      result.match_f64 = diff64 / scale64;
    }
  } catch (error) {
    result.error = String(error && error.message || error);
  }
  result.peak_rss_mb = peakRssMb();
  console.log('RESULT ' + JSON.stringify(result));
}

main();
