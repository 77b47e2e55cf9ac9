# Sourced by the device scripts (run_device.sh, run_attention_device.sh): sets
# BUNDLE to a folder made by `tools/bundle.sh --cuda` (bin/, lib/, share/).
# ZV_BUNDLE names a bundle folder or its .tar.xz; the default is
# dist/zerovec-cuda, else dist/zerovec-cuda.tar.xz, which is what travels to the
# GPU machine (the unpacked folder is larger than the device tool carries).
# A tarball is unpacked under ZV_BUNDLE_UNPACK (default /tmp/zv-bundle).
zv_bundle_src=${ZV_BUNDLE:-dist/zerovec-cuda}
if [[ ! -e $zv_bundle_src && -z ${ZV_BUNDLE:-} ]]; then
  zv_bundle_src=dist/zerovec-cuda.tar.xz
fi
if [[ -d $zv_bundle_src ]]; then
  BUNDLE=$(cd "$zv_bundle_src" && pwd)
elif [[ -f $zv_bundle_src ]]; then
  zv_unpack=${ZV_BUNDLE_UNPACK:-/tmp/zv-bundle}
  rm -rf "$zv_unpack"
  mkdir -p "$zv_unpack"
  # Python's tarfile where xz(1) is missing (a bare Ubuntu image).
  if command -v xz >/dev/null; then
    tar -xJf "$zv_bundle_src" -C "$zv_unpack"
  else
    python3 -c 'import sys, tarfile
t = tarfile.open(sys.argv[1])
t.extractall(sys.argv[2], **({"filter": "data"} if hasattr(tarfile, "data_filter") else {}))' \
      "$zv_bundle_src" "$zv_unpack"
  fi
  BUNDLE=$(cd "$zv_unpack"/*/ && pwd)
else
  echo "no bundle at $zv_bundle_src: run tools/bundle.sh --cuda ... here and carry it" >&2
  exit 1
fi
echo "bundle: $BUNDLE"
unset zv_bundle_src zv_unpack
