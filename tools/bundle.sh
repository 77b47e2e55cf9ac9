#!/usr/bin/env bash
# Builds ZeroVec programs with Bazel and packs them into a relocatable folder that
# runs on a machine with none of Debian's libraries (e.g. the Ubuntu GPU machine):
#   tools/bundle.sh [--cuda] [--python | --no-python] [--out DIR] [TARGET...]
# TARGETs are cc_binary / cc_test / sh_test labels or patterns (default
# //tools:zerovec); --cuda builds with --config=cuda. DIR defaults to
# dist/zerovec-cuda or dist/zerovec-cpu (git-ignored). Writes DIR and DIR.tar.xz:
#   DIR/bin/NAME                   each program; RUNPATH $ORIGIN/../lib (plus the
#                                  absolute dirs Bazel linked with, i.e.
#                                  /usr/local/cuda/lib64 for CUDA programs)
#   DIR/bin/run-test NAME [ARGS]   runs a bundled test as `bazel test` would: cwd
#                                  DIR/share/zerovec, TEST_SRCDIR=DIR/share,
#                                  TEST_WORKSPACE=zerovec, a fresh TEST_TMPDIR
#   DIR/lib/                       every shared library the programs load except
#                                  what the host must provide: glibc, libstdc++,
#                                  libgcc_s and CUDA's driver/cudart/cuBLAS; each
#                                  with RUNPATH $ORIGIN
#   DIR/share/zerovec/             the tests' runfiles tree (tests/data, ...) and
#                                  the default model, models/zerovec-mini
#   DIR/python/zerovec/            the Python package with its generated gRPC stubs
#                                  and the attach extension (for CPython 3.11, as
#                                  built; RUNPATH $ORIGIN/../../lib); put DIR/python
#                                  on PYTHONPATH. In CPU bundles unless --no-python;
#                                  in --cuda ones (carried to the GPU machine, whose
#                                  Python differs) only with --python.
# Programs never need LD_LIBRARY_PATH: `DIR/bin/zerovec --help`,
# `DIR/bin/run-test cuda_encoder_test --gtest_brief=1`.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() {
  echo "usage: tools/bundle.sh [--cuda] [--python | --no-python] [--out DIR] [TARGET...]" >&2
  exit 2
}

cuda=0
python=""
out=""
targets=()
while (($#)); do
  case $1 in
    --cuda) cuda=1 ;;
    --python) python=1 ;;
    --no-python) python=0 ;;
    --out)
      (($# >= 2)) || usage
      out=$2
      shift
      ;;
    --out=*) out=${1#--out=} ;;
    -h | --help) usage ;;
    -*) usage ;;
    *) targets+=("$1") ;;
  esac
  shift
done
((${#targets[@]})) || targets=(//tools:zerovec)
[[ -n $python ]] || python=$((!cuda))
flavour=$([[ $cuda == 1 ]] && echo cuda || echo cpu)
out=${out:-dist/zerovec-$flavour}

BAZEL_FLAGS=(--jobs=2)
((cuda)) && BAZEL_FLAGS+=(--config=cuda)
# --symlink_prefix=/: leave the workspace's bazel-bin link to whoever else builds.
BUILD_FLAGS=("${BAZEL_FLAGS[@]}" --symlink_prefix=/)

# Resolve patterns to the programs and tests they name (query sees manual
# targets too).
query=$(printf '%s + ' "${targets[@]}")
mapfile -t kinds < <(bazel query --output=label_kind \
  "kind('^(cc|sh)_(binary|test) rule\$', ${query% + })" 2>/dev/null)
((${#kinds[@]})) || {
  echo "bundle: no cc_binary, cc_test or sh_test in ${targets[*]}" >&2
  exit 2
}
labels=()
for k in "${kinds[@]}"; do labels+=("${k##* }"); done

PY_TARGETS=(//python:zerovec/_attach.so //python:zerovec_py_stubs)
((python)) || PY_TARGETS=()
echo "bundle: building ${labels[*]} ${PY_TARGETS[*]} (${flavour})"
bazel build "${BUILD_FLAGS[@]}" "${labels[@]}" "${PY_TARGETS[@]}"
bin_dir=$(bazel info "${BAZEL_FLAGS[@]}" bazel-bin 2>/dev/null)

# Assembled in a staging folder beside DIR and moved into place at the end, so
# a concurrent run or a reader of DIR never sees half a bundle.
mkdir -p "$(dirname "$out")"
final=$(cd "$(dirname "$out")" && pwd)/$(basename "$out")
staging=$(mktemp -d "$final.staging.XXXXXX")
trap 'rm -rf "$staging"' EXIT
out=$staging/$(basename "$final")
mkdir -p "$out/bin" "$out/lib" "$out/share/zerovec/models"

is_elf() { [[ $(head -c4 "$1" | od -An -c | tr -d ' ') == 177ELF ]]; }

# Programs first: bin/NAME. ELF files to fix up map to the Bazel output their
# libraries resolve from; in_bin maps a Bazel output to its copy in bin/.
declare -A elf_src in_bin
for k in "${kinds[@]}"; do
  label=${k##* }
  pkg=${label#//}
  pkg=${pkg%%:*}
  name=${label##*:}
  src=$bin_dir/$pkg/$name
  if [[ -e $out/bin/$name ]]; then
    echo "bundle: two programs named $name" >&2
    exit 1
  fi
  cp -L "$src" "$out/bin/$name"
  in_bin[$(readlink -f "$src")]=$name
  if is_elf "$src"; then elf_src[$out/bin/$name]=$src; fi
done
# Then each test's data, laid out as in its Bazel runfiles tree (the manifest
# lists every file; Bazel's _solib links are replaced by lib/, and a program
# already in bin/ becomes a symlink to it: $ORIGIN follows the link).
for k in "${kinds[@]}"; do
  [[ $k == *_test" rule "* ]] || continue
  label=${k##* }
  pkg=${label#//}
  pkg=${pkg%%:*}
  name=${label##*:}
  while read -r rel abs; do
    [[ -n $abs && $rel != zerovec/_solib_* && $rel != "zerovec/$pkg/$name" ]] || continue
    dst=$out/share/$rel
    [[ -e $dst ]] && continue
    mkdir -p "$(dirname "$dst")"
    real=$(readlink -f "$abs")
    if [[ -n ${in_bin[$real]:-} ]]; then
      ln -s "$(realpath --relative-to="$(dirname "$dst")" "$out/bin")/${in_bin[$real]}" "$dst"
      continue
    fi
    cp -L "$abs" "$dst"
    if is_elf "$abs"; then elf_src[$dst]=$abs; fi  # a helper program the test runs
  done <"$bin_dir/$pkg/$name.runfiles_manifest"
done
# The Python package: sources, the generated stubs and the extension, whose
# libraries are fixed up below like the programs'.
if ((python)); then
  mkdir -p "$out/python/zerovec/v1"
  cp python/zerovec/*.py "$out/python/zerovec/"
  cp python/zerovec/v1/__init__.py "$bin_dir"/python/zerovec/v1/zerovec_pb2*.py \
    "$out/python/zerovec/v1/"
  cp -L "$bin_dir/python/zerovec/_attach.so" "$out/python/zerovec/_attach.so"
  elf_src[$out/python/zerovec/_attach.so]=$bin_dir/python/zerovec/_attach.so
fi
# The default model: tools/cli_util.cc looks for it at
# <dir of the program>/../share/zerovec/models/zerovec-mini.
rm -rf "$out/share/zerovec/models/zerovec-mini"
cp -r models/zerovec-mini "$out/share/zerovec/models/"

# Libraries the host provides (glibc, the C++ runtime, CUDA's driver and the CUDA
# libraries the toolkit installs); everything else travels.
host_lib() {
  case $1 in
    linux-vdso.so* | ld-linux*.so* | libc.so.* | libm.so.* | libdl.so.* | libpthread.so.* | \
      librt.so.* | libresolv.so.* | libutil.so.* | libanl.so.* | libmvec.so.*) return 0 ;;
    libstdc++.so.* | libgcc_s.so.*) return 0 ;;
    libcuda.so.* | libcudart.so.* | libcublas.so.* | libcublasLt.so.*) return 0 ;;
  esac
  return 1
}

# ldd on the Bazel outputs (their RUNPATHs still resolve there) lists each
# program's libraries transitively.
for f in "${!elf_src[@]}"; do
  ldd "${elf_src[$f]}" | while read -r name arrow path _; do
    [[ $arrow == "=>" ]] || continue
    host_lib "$name" && continue
    if [[ $path == "not" ]]; then
      echo "bundle: ${elf_src[$f]} needs $name, which is not found" >&2
      exit 1
    fi
    [[ -e $out/lib/$name ]] || cp -L "$path" "$out/lib/$name"
  done
done

# RUNPATH: the bundle's lib/ first, then the absolute directories Bazel linked
# with (/usr/local/cuda/lib64 for CUDA programs); Bazel's relative entries go.
set_runpath() {  # FILE RELATIVE-LIB-DIR
  local keep="" dir dirs
  IFS=: read -ra dirs <<<"$(patchelf --print-rpath "$1")"
  for dir in "${dirs[@]}"; do
    [[ $dir == /* ]] && keep+=":$dir"
  done
  patchelf --set-rpath "\$ORIGIN${2:+/$2}$keep" "$1"
}
chmod -R u+w "$out"
for f in "${!elf_src[@]}" "$out"/lib/*; do strip --strip-debug "$f"; done
for f in "${!elf_src[@]}"; do
  set_runpath "$f" "$(realpath --relative-to="$(dirname "$f")" "$out/lib")"
done
for f in "$out"/lib/*; do set_runpath "$f" ""; done

cat >"$out/bin/run-test" <<'EOF'
#!/usr/bin/env bash
# Runs a bundled test the way `bazel test` does: from the runfiles root
# (share/zerovec), with TEST_SRCDIR / TEST_WORKSPACE / TEST_TMPDIR set.
#   bin/run-test NAME [ARGS...]      e.g. bin/run-test cuda_encoder_test
set -euo pipefail
(($#)) || { echo "usage: $0 TEST [ARGS...]" >&2; exit 2; }
bin=$(cd "$(dirname "$(readlink -f "$0")")" && pwd)
name=$1
shift
[[ -x $bin/$name && $name != run-test ]] || { echo "run-test: no test $name in $bin" >&2; exit 2; }
export TEST_SRCDIR=$bin/../share TEST_WORKSPACE=zerovec
own_tmp=""
if [[ -z ${TEST_TMPDIR:-} ]]; then
  own_tmp=$(mktemp -d)
  export TEST_TMPDIR=$own_tmp
fi
cd "$TEST_SRCDIR/$TEST_WORKSPACE"
rc=0
"$bin/$name" "$@" || rc=$?
[[ -z $own_tmp ]] || rm -rf "$own_tmp"
exit $rc
EOF
chmod 755 "$out/bin/run-test"

# The host must provide at least these symbol versions (Ubuntu 24.04 has
# GLIBC 2.39, GLIBCXX 3.4.32/33, CXXABI 1.3.14/15).
max_version() {  # PREFIX: the highest PREFIX_x.y any bundled ELF needs
  for f in "${!elf_src[@]}" "$out"/lib/*; do objdump -T "$f"; done |
    grep -o "$1_[0-9.]*[0-9]" | sort -Vu | tail -1
}
glibc=$(max_version GLIBC)
glibcxx=$(max_version GLIBCXX)
cxxabi=$(max_version CXXABI)
newest() { printf '%s\n%s\n' "$1" "$2" | sort -V | tail -1; }
if [[ $(newest "$glibc" GLIBC_2.39) != GLIBC_2.39 || $(newest "$glibcxx" GLIBCXX_3.4.32) != GLIBCXX_3.4.32 ]]; then
  echo "bundle: needs $glibc / $glibcxx, newer than Ubuntu 24.04 provides" >&2
  exit 1
fi

# Relocatable: with no environment, every library a program loads comes from
# lib/ or the host's own set.
for f in "${!elf_src[@]}"; do
  env -i PATH=/usr/bin:/bin ldd "$f" | while read -r name arrow path _; do
    [[ $arrow == "=>" ]] || continue
    host_lib "$name" && continue
    if [[ $(realpath -m "$path") != "$out/lib/"* ]]; then
      echo "bundle: $f loads $name from $path, not from the bundle" >&2
      exit 1
    fi
  done
done

cat >"$out/README.txt" <<EOF
ZeroVec bundle ($flavour), built by tools/bundle.sh from $(git rev-parse --short HEAD 2>/dev/null || echo "?")
for: ${labels[*]}
bin/NAME                  programs (RUNPATH \$ORIGIN/../lib; no LD_LIBRARY_PATH needed)
bin/run-test NAME [ARGS]  a test, run from share/zerovec as Bazel would
lib/                      bundled shared libraries (host provides glibc, libstdc++,
                          libgcc_s, libcuda, libcudart, libcublas, libcublasLt)
share/zerovec/            tests' runfiles; default model models/zerovec-mini
python/                   the zerovec Python package (PYTHONPATH=DIR/python; CPython 3.11)
needs: $glibc, $glibcxx, $cxxabi
EOF

tar -C "$staging" -cf - "$(basename "$out")" | xz -T2 -9 >"$out.tar.xz"
sizes="$(du -sb "$out" | cut -f1) bytes: bin $(du -sb "$out/bin" | cut -f1),\
 lib $(du -sb "$out/lib" | cut -f1), share $(du -sb "$out/share" | cut -f1)"
libs=$(cd "$out/lib" && echo *)
rm -rf "$final" "$final.tar.xz"
mv "$out" "$final"
mv "$out.tar.xz" "$final.tar.xz"
echo "bundle: $final ($sizes)"
echo "bundle: $final.tar.xz ($(stat -c %s "$final.tar.xz") bytes)"
echo "bundle: needs $glibc, $glibcxx, $cxxabi; libraries: $libs"
