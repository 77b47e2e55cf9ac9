#!/usr/bin/env python3
"""Python paths to one k=10 search over N rows (issue 16), same queries, one run:
  attach   zerovec.attach (the C++ AttachedCollection in process, rows mapped)
  grpc     zerovec.Client against a local `zerovec serve`
  faiss    Debian's python3-faiss IndexFlatIP over a numpy copy of the rows
and the private memory of R reader processes: attach vs a faiss copy each.
Exact (Flat) everywhere. Build first (-c opt), then:

  bazel build -c opt //python:zerovec/_attach.so //python:zerovec_py_stubs //tools:zerovec
  /usr/bin/python3 bench/python_attach_bench.py [--rows 100000] [--dim 384] [--readers 8]
"""
import argparse
import multiprocessing as mp
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def setup_path():
    """The package sources plus Bazel's generated stubs and extension."""
    bin_dir = subprocess.check_output(["bazel", "info", "-c", "opt", "bazel-bin"],
                                      cwd=ROOT, text=True, stderr=subprocess.DEVNULL).strip()
    pkg = tempfile.mkdtemp(prefix="zv_bench_pkg_")
    os.makedirs(os.path.join(pkg, "zerovec", "v1"))
    for rel in os.listdir(os.path.join(ROOT, "python", "zerovec")):
        if rel.endswith(".py"):
            os.symlink(os.path.join(ROOT, "python", "zerovec", rel),
                       os.path.join(pkg, "zerovec", rel))
    for rel in ("zerovec_pb2.py", "zerovec_pb2_grpc.py"):
        os.symlink(os.path.join(bin_dir, "python", "zerovec", "v1", rel),
                   os.path.join(pkg, "zerovec", "v1", rel))
    open(os.path.join(pkg, "zerovec", "v1", "__init__.py"), "w").close()
    os.symlink(os.path.join(bin_dir, "python", "zerovec", "_attach.so"),
               os.path.join(pkg, "zerovec", "_attach.so"))
    return pkg, os.path.join(bin_dir, "tools", "zerovec")


def private_kib():
    """Private memory of this process (smaps_rollup Private_Clean + Private_Dirty)."""
    total = 0
    with open("/proc/self/smaps_rollup") as f:
        for line in f:
            if line.startswith(("Private_Clean:", "Private_Dirty:")):
                total += int(line.split()[1])
    return total


def reader(kind, data_dir, query, out):
    import zerovec
    col = zerovec.attach(data_dir, "bench")
    if kind == "attach":
        sum(float(v.sum()) for v in col.rows())  # touch every row
        col.search(query, k=10, include_documents=False)
    else:
        import faiss
        rows = np.concatenate(col.rows())
        del col
        index = faiss.IndexFlatIP(rows.shape[1])
        index.add(rows)
        del rows
        index.search(query[None], 10)
    out.put(private_kib())


def timed(fn, queries, warmup=20):
    for q in queries[:warmup]:
        fn(q)
    lat = []
    for q in queries:
        t = time.perf_counter()
        fn(q)
        lat.append((time.perf_counter() - t) * 1e6)
    lat.sort()
    return statistics.median(lat), lat[int(0.99 * (len(lat) - 1))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=100000)
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--readers", type=int, default=8)
    args = ap.parse_args()
    pkg, zerovec_bin = setup_path()
    sys.path.insert(0, pkg)
    os.environ["PYTHONPATH"] = pkg
    import faiss
    import zerovec

    rng = np.random.default_rng(1)
    base = rng.standard_normal((args.rows, args.dim)).astype(np.float32)
    base /= np.linalg.norm(base, axis=1, keepdims=True)
    queries = rng.standard_normal((args.queries, args.dim)).astype(np.float32)
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)

    tmp = tempfile.mkdtemp(prefix="zv_bench_")
    data = os.path.join(tmp, "data")
    server = subprocess.Popen([zerovec_bin, "serve", "--data", data, "--model", "none",
                               "--listen", "127.0.0.1:0", "--port-file",
                               os.path.join(tmp, "port")], stderr=subprocess.DEVNULL)
    try:
        while not os.path.exists(os.path.join(tmp, "port")) or \
                not open(os.path.join(tmp, "port")).read().strip():
            time.sleep(0.05)
        address = "127.0.0.1:" + open(os.path.join(tmp, "port")).read().strip()
        client = zerovec.Client(address)
        client.create_collection("bench", dim=args.dim)
        t = time.time()
        client.upsert("bench", [f"r{i}" for i in range(args.rows)], vectors=base)
        print(f"upserted {args.rows} x {args.dim} through gRPC in {time.time() - t:.1f} s")

        col = zerovec.attach(data, "bench")
        index = faiss.IndexFlatIP(args.dim)
        index.add(np.concatenate(col.rows()))
        paths = {
            "attach": lambda q: col.search(q, k=10, include_documents=False),
            "grpc": lambda q: client.search("bench", vector=q, k=10, include_documents=False),
            "faiss": lambda q: index.search(q[None], 10),
        }
        for name, fn in paths.items():
            p50, p99 = timed(fn, queries)
            print(f"{name:7s} k=10 over {args.rows}: p50 {p50:8.0f} us  p99 {p99:8.0f} us")
        # Same answers (exact everywhere): the top id of a few queries.
        a = [col.search(q, k=1, include_documents=False)[0].id for q in queries[:20]]
        f = [f"r{index.search(q[None], 1)[1][0][0]}" for q in queries[:20]]
        print("attach and faiss agree on the top hit of 20 queries:", a == f)

        ctx = mp.get_context("spawn")
        rows_mib = args.rows * args.dim * 4 / 2**20
        for kind in ("attach", "faiss"):
            out = ctx.Queue()
            procs = [ctx.Process(target=reader, args=(kind, data, queries[0], out))
                     for _ in range(args.readers)]
            for p in procs:
                p.start()
            kib = [out.get(timeout=600) for _ in procs]
            for p in procs:
                p.join()
            print(f"{args.readers} readers, {kind:6s}: private memory "
                  f"{sum(kib) / 1024:7.1f} MiB in all ({max(kib) / 1024:.1f} MiB max each; "
                  f"rows are {rows_mib:.1f} MiB)")
    finally:
        server.terminate()
        server.wait()
        subprocess.run(["rm", "-rf", tmp, pkg])


if __name__ == "__main__":
    main()
