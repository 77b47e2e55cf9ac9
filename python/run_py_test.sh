#!/bin/bash
# Runs a Python test file with the runfiles' python/ folder on PYTHONPATH, using
# Debian's interpreter (its grpcio, numpy). Under --config=asan the extension
# carries the sanitizer runtimes, which must load first: preload them.
set -uo pipefail
ROOT="$PWD"
export PYTHONPATH="$ROOT/python"
export ZEROVEC_BIN="$ROOT/tools/zerovec"
export ZEROVEC_MODEL="$ROOT/models/zerovec-mini"
ext="$ROOT/python/zerovec/_attach.so"
preload=""
for lib in libasan libubsan libtsan; do
  path=$(ldd "$ext" 2>/dev/null | awk -v l="$lib" '$1 ~ "^"l {print $3; exit}')
  [[ -n $path ]] && preload+="${preload:+:}$path"
done
if [[ -n $preload ]]; then
  export LD_PRELOAD="$preload"
  # CPython keeps its interned objects for the process' life: not leaks.
  export ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0"
fi
exec /usr/bin/python3 -u "$@"
