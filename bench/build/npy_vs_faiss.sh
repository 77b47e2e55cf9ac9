#!/usr/bin/env bash
# `zerovec build` of N x D float32 vectors from .npy against python3-faiss
# IndexFlatIP.add of the same array plus writing the same ids to a file, in one
# run, alternating, REPEAT times each (bench/RESULTS.md).
#   bench/build/npy_vs_faiss.sh [N] [D] [REPEAT]     (needs python3-numpy, python3-faiss)
set -euo pipefail
cd "$(dirname "$0")/../.."
N=${1:-1000000}
D=${2:-384}
REPEAT=${3:-3}
W=$(mktemp -d /tmp/npy_vs_faiss.XXXXXX)
trap 'rm -rf "$W"' EXIT
bazel build -c opt //tools:zerovec >/dev/null 2>&1
Z=$(bazel info -c opt bazel-bin 2>/dev/null)/tools/zerovec
/usr/bin/python3 - "$W/v.npy" "$N" "$D" <<'PY'
import sys, numpy as np
n, d = int(sys.argv[2]), int(sys.argv[3])
x = np.random.default_rng(1).standard_normal((n, d), dtype=np.float32)
x /= np.linalg.norm(x, axis=1, keepdims=True)
np.save(sys.argv[1], x)
PY
cat >"$W/faiss_add.py" <<'PY'
import sys, time, numpy as np, faiss
t = time.perf_counter()
x = np.load(sys.argv[1], mmap_mode="r")
index = faiss.IndexFlatIP(x.shape[1])
index.add(np.ascontiguousarray(x))
with open(sys.argv[2], "w") as f:
    f.write("\n".join(str(i) for i in range(x.shape[0])))
    f.write("\n")
s = time.perf_counter() - t
print(f"faiss IndexFlatIP.add + ids file: {x.shape[0]} rows in {s:.2f} s = {x.shape[0] / s:.0f} rows/s")
PY
cat /proc/loadavg
for r in $(seq "$REPEAT"); do
  rm -rf "$W/data"
  "$Z" build --data "$W/data" --collection v --input "$W/v.npy" 2>/dev/null | head -2
  /usr/bin/python3 "$W/faiss_add.py" "$W/v.npy" "$W/ids.txt"
done
cat /proc/loadavg
