#!/usr/bin/env node
// LanceDB (in process under Node) on the same vectors as bench/index_bench:
// bulk ingest rows/s (batches of 10,000 rows, as index_bench upserts), index
// build time (IVF_HNSW_SQ with one partition: LanceDB's HNSW; M and
// efConstruction as ZeroVec's), then recall@10 against an exact inner-product
// scan, latency (one query at a time) and QPS (every query in flight at once)
// over an efSearch sweep, with and without LanceDB's refine step (re-rank
// refine x k candidates by the full vectors: SQ alone caps recall near 0.96),
// plus the fastest setting at each matched recall. Issue 21.
//
//   (cd bench/lancedb && npm install)     # @lancedb/lancedb 0.37.1 (Node 18)
//   node bench/lancedb/lancedb_bench.js --base B.npy --queries Q.npy
//       [--truth T.npy] [--rows N] [--m 32] [--efc 100]
//       [--efs 16,32,...] [--refine 0,4] [--dir /tmp/lancedb-bench]
// --truth: index_bench --dump_npy's exact top 10 (int64); without it the truth
// is a JS scan (minutes at 1M rows). --refine 0 means no refine step.
"use strict";
const fs = require("fs");
const os = require("os");
const path = require("path");
const arrow = require("apache-arrow");
const lancedb = require("@lancedb/lancedb");

const K = 10;

function args() {
  const a = { rows: Infinity, m: 32, efc: 100, efs: "16,32,64,128,256,512", refine: "0,4",
              dir: path.join(os.tmpdir(), "lancedb-bench") };
  const known = new Set(["base", "queries", "truth", "rows", "m", "efc", "efs", "refine", "dir"]);
  for (let i = 2; i < process.argv.length; i += 2) {
    const k = process.argv[i].replace(/^--/, "");
    const v = process.argv[i + 1];
    if (!known.has(k) || v === undefined) {
      console.error(`unknown flag or missing value: ${process.argv[i]}`);
      a.base = undefined;
      break;
    }
    a[k] = ["rows", "m", "efc"].includes(k) ? Number(v) : v;
  }
  const list = (s) => String(s).split(",").map(Number);
  a.efs = list(a.efs);
  a.refine = list(a.refine);
  const bad = a.efs.some((x) => !(x >= 1)) || a.refine.some((x) => !(x >= 0));
  if (!a.base || !a.queries || bad) {
    console.error("usage: lancedb_bench.js --base B.npy --queries Q.npy [--truth T.npy] [--rows N] " +
                  "[--m 32] [--efc 100] [--efs 16,32,...] [--refine 0,4] [--dir D]");
    process.exit(2);
  }
  return a;
}

// A 2-D little-endian float32 C-order .npy file: {rows, dim, data}.
function readNpy(file, maxRows) {
  const buf = fs.readFileSync(file);
  if (buf.toString("latin1", 1, 6) !== "NUMPY") throw new Error(`${file}: not .npy`);
  const major = buf[6];
  const hlen = major === 1 ? buf.readUInt16LE(8) : buf.readUInt32LE(8);
  const hstart = major === 1 ? 10 : 12;
  const header = buf.toString("latin1", hstart, hstart + hlen);
  if (!/'descr':\s*'<f4'/.test(header) || /'fortran_order':\s*True/.test(header))
    throw new Error(`${file}: want '<f4' C order`);
  const shape = header.match(/'shape':\s*\((\d+),\s*(\d+)\)/);
  if (!shape) throw new Error(`${file}: want a 2-D array`);
  const rows = Math.min(Number(shape[1]), maxRows);
  const dim = Number(shape[2]);
  const off = hstart + hlen;
  const data = new Float32Array(rows * dim);
  new Uint8Array(data.buffer).set(buf.subarray(off, off + rows * dim * 4));
  return { rows, dim, data };
}

// index_bench's truth: '<i8' rows of K ids.
function readTruth(file, nq) {
  const buf = fs.readFileSync(file);
  if (buf.toString("latin1", 1, 6) !== "NUMPY") throw new Error(`${file}: not .npy`);
  const hlen = buf.readUInt16LE(8);
  const header = buf.toString("latin1", 10, 10 + hlen);
  const shape = header.match(/'shape':\s*\((\d+),\s*(\d+)\)/);
  if (!/'descr':\s*'<i8'/.test(header) || !shape || Number(shape[2]) !== K || Number(shape[1]) < nq)
    throw new Error(`${file}: want '<i8' of shape (>= ${nq}, ${K})`);
  const ids = new BigInt64Array(buf.buffer.slice(buf.byteOffset + 10 + hlen, buf.byteOffset + 10 + hlen + nq * K * 8));
  return Array.from({ length: nq }, (_, i) => new Set(Array.from(ids.subarray(i * K, (i + 1) * K), Number)));
}

// Exact top-K by inner product (the truth).
function exactTopK(base, q) {
  const { rows, dim, data } = base;
  const truth = [];
  for (let i = 0; i < q.rows; i++) {
    const qo = i * dim;
    const best = []; // [score, row], ascending, at most K
    for (let r = 0; r < rows; r++) {
      let s = 0;
      const ro = r * dim;
      for (let j = 0; j < dim; j++) s += data[ro + j] * q.data[qo + j];
      if (best.length < K || s > best[0][0]) {
        best.push([s, r]);
        best.sort((x, y) => x[0] - y[0]);
        if (best.length > K) best.shift();
      }
    }
    truth.push(new Set(best.map((b) => b[1])));
  }
  return truth;
}

function batchTable(base, first, n) {
  const { dim, data } = base;
  const floats = data.subarray(first * dim, (first + n) * dim);
  const child = arrow.makeData({ type: new arrow.Float32(), length: n * dim, nullCount: 0, data: floats });
  const listType = new arrow.FixedSizeList(dim, new arrow.Field("item", new arrow.Float32(), true));
  const vectors = arrow.makeVector(arrow.makeData({ type: listType, length: n, nullCount: 0, child }));
  const ids = arrow.makeVector(Int32Array.from({ length: n }, (_, i) => first + i));
  return new arrow.Table({ id: ids, vector: vectors });
}

async function search(table, q, i, ef, refine) {
  const v = q.data.subarray(i * q.dim, (i + 1) * q.dim);
  let query = table.vectorSearch(v).distanceType("dot").limit(K).nprobes(1).ef(ef);
  if (refine > 0) query = query.refineFactor(refine);
  const rows = await query.select(["id"]).toArray();
  return rows.map((r) => r.id);
}

function recall(got, truth) {
  let hits = 0;
  got.forEach((ids, i) => ids.forEach((id) => (hits += truth[i].has(id) ? 1 : 0)));
  return hits / (truth.length * K);
}

async function main() {
  const a = args();
  const base = readNpy(a.base, a.rows);
  const q = readNpy(a.queries, Infinity);
  console.log(`LanceDB ${JSON.parse(fs.readFileSync(path.join(__dirname, "node_modules/@lancedb/lancedb/package.json"))).version}, Node ${process.version}, ` +
    `${os.cpus().length} CPUs; ${base.rows} rows x ${base.dim}, ${q.rows} queries, k=${K}`);
  let t = Date.now();
  const truth = a.truth ? readTruth(a.truth, q.rows) : exactTopK(base, q);
  console.log(a.truth ? `exact truth: ${a.truth}` : `exact truth (JS scan): ${((Date.now() - t) / 1000).toFixed(1)} s`);

  fs.rmSync(a.dir, { recursive: true, force: true });
  const db = await lancedb.connect(a.dir);
  const B = 10000;
  t = process.hrtime.bigint();
  const table = await db.createTable("v", batchTable(base, 0, Math.min(B, base.rows)));
  for (let first = B; first < base.rows; first += B)
    await table.add(batchTable(base, first, Math.min(B, base.rows - first)));
  const ingestS = Number(process.hrtime.bigint() - t) / 1e9;
  t = process.hrtime.bigint();
  await table.createIndex("vector", {
    config: lancedb.Index.hnswSq({ distanceType: "dot", numPartitions: 1, m: a.m, efConstruction: a.efc }),
  });
  const indexS = Number(process.hrtime.bigint() - t) / 1e9;
  console.log(`\n| engine | bulk ingest s | ingest rows/s | index build s (IVF_HNSW_SQ, 1 partition, M ${a.m}, efC ${a.efc}) |`);
  console.log(`|---|---|---|---|`);
  console.log(`| LanceDB | ${ingestS.toFixed(2)} | ${Math.round(base.rows / ingestS)} | ${indexS.toFixed(1)} |`);

  console.log(`\n| efSearch | refine | LanceDB recall@10 | ms (1 query) | QPS (all ${q.rows} in flight) |`);
  console.log(`|---|---|---|---|---|`);
  const sweep = [];
  for (const refine of a.refine) {
    for (const ef of a.efs) {
      if (ef < K * refine) continue; // LanceDB: ef must cover the refined k
      for (let i = 0; i < Math.min(20, q.rows); i++) await search(table, q, i, ef, refine); // warm
      const got = [];
      t = process.hrtime.bigint();
      for (let i = 0; i < q.rows; i++) got.push(await search(table, q, i, ef, refine));
      const ms = Number(process.hrtime.bigint() - t) / 1e6 / q.rows;
      t = process.hrtime.bigint();
      await Promise.all(Array.from({ length: q.rows }, (_, i) => search(table, q, i, ef, refine)));
      const qps = q.rows / (Number(process.hrtime.bigint() - t) / 1e9);
      const r = recall(got, truth);
      sweep.push({ ef, refine, r, ms, qps });
      console.log(`| ${ef} | ${refine || "none"} | ${r.toFixed(4)} | ${ms.toFixed(3)} | ${Math.round(qps)} |`);
    }
  }
  // The fastest swept setting reaching each recall (by latency).
  console.log(`\n| recall@10 >= | LanceDB ef | refine | ms | QPS |\n|---|---|---|---|---|`);
  for (const target of [0.9, 0.95, 0.99]) {
    const reach = sweep.filter((s) => s.r >= target).sort((x, y) => x.ms - y.ms);
    const p = reach[0];
    console.log(p ? `| ${target.toFixed(2)} | ${p.ef} | ${p.refine || "none"} | ${p.ms.toFixed(3)} | ${Math.round(p.qps)} |`
                  : `| ${target.toFixed(2)} | not reached | - | - | - |`);
  }
  fs.rmSync(a.dir, { recursive: true, force: true });
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
