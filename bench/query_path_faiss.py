#!/usr/bin/env python3
"""Path (c) of bench/query_paths.sh: Debian's python3-faiss IndexFlatIP over a numpy
copy of the base vectors query_path_bench wrote, one k=10 search at a time, the same
queries, runs and statistics as the C++ side; then prints the combined table.

  /usr/bin/python3 bench/query_path_faiss.py --dir DIR [--runs 5] [--warmup 200]
"""
import argparse
import json
import os
import statistics
import time

import faiss
import numpy as np


def percentile(v, p):
    v = sorted(v)
    pos = p * (len(v) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (pos - lo) * (v[hi] - v[lo])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=200)
    ap.add_argument("--load", default="", help="load average recorded before the C++ side")
    args = ap.parse_args()

    cpp = json.load(open(os.path.join(args.dir, "cpp.json")))
    dim, k = cpp["dim"], cpp["k"]
    base = np.fromfile(os.path.join(args.dir, "base.f32"), dtype=np.float32).reshape(-1, dim)
    xq = np.fromfile(os.path.join(args.dir, "queries.f32"), dtype=np.float32).reshape(-1, dim)
    nq = xq.shape[0]
    index = faiss.IndexFlatIP(dim)
    index.add(base)  # the index holds its own copy
    del base
    load_py = os.getloadavg()[0]

    ids = [None] * nq
    threads = faiss.omp_get_max_threads()

    def one_run():
        lat = []
        start = time.perf_counter()
        for i in range(nq):
            t0 = time.perf_counter()
            _, I = index.search(xq[i:i + 1], k)
            lat.append((time.perf_counter() - t0) * 1e6)
            ids[i] = I[0].tolist()
        total = time.perf_counter() - start
        return percentile(lat, 0.5), percentile(lat, 0.99), nq / total

    for i in range(min(args.warmup, nq)):
        index.search(xq[i:i + 1], k)
    runs, runs1 = [], []
    for _ in range(args.runs):  # default threads and one thread, alternating
        runs.append(one_run())
        faiss.omp_set_num_threads(1)
        runs1.append(one_run())
        faiss.omp_set_num_threads(threads)

    def med(rs):
        return {"p50_us": statistics.median(r[0] for r in rs),
                "p99_us": statistics.median(r[1] for r in rs),
                "qps": statistics.median(r[2] for r in rs)}
    py, py1 = med(runs), med(runs1)
    same = sum(1 for a, b in zip(ids, cpp["ids"]) if a == b)
    overlap = sum(len(set(a) & set(b)) for a, b in zip(ids, cpp["ids"])) / (k * nq)

    rows = [("(a) gRPC loopback, in-process `service::Server`, vector query", cpp["grpc"]),
            ("(b) `AttachedCollection::Search` in-process after attach", cpp["attach"]),
            ("(b1) same as (b), 1 OpenMP thread", cpp["attach_1thread"]),
            ("(c) python3-faiss `IndexFlatIP` over a numpy copy", py),
            ("(c1) same as (c), `faiss.omp_set_num_threads(1)`", py1)]
    out = ["| path | p50 µs | p99 µs | QPS (1 client) | vs (b) QPS |",
           "| --- | ---: | ---: | ---: | ---: |"]
    for name, r in rows:
        out.append("| %s | %.0f | %.0f | %.0f | %.2fx |" % (name, r["p50_us"], r["p99_us"], r["qps"],
                                                           r["qps"] / cpp["attach"]["qps"]))
    out.append("")
    out.append("%d rows x %d, %d queries, k=%d, %d runs after %d warm-up queries, medians over runs; "
               "ZeroVec OpenMP threads %d, faiss %s with %d OpenMP threads; "
               "top-%d identical (c) vs (b): %d/%d queries, overlap %.4f; (a) vs (b) identical: %d/%d; "
               "load avg 1 min: %s before C++, %.2f before Python." % (
                   cpp["rows"], dim, nq, k, args.runs, args.warmup, cpp["omp_threads"],
                   faiss.__version__, threads, k, same, nq, overlap,
                   cpp["grpc_attach_same_topk"], nq, args.load or "?", load_py))
    print("\n".join(out))


if __name__ == "__main__":
    main()
