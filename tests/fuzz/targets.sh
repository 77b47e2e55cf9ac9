# Sourced by run_fuzzers.sh: registers the fuzz targets beyond segment_attach into
# the SOURCES / LIBS arrays (compiled with $CXX from the repository root).
# The request-validation target needs the zerovec.v1 protobuf code: protoc writes
# it into a temp dir (no Bazel), which is added to the include path.
ZV_FUZZ_ROOT=$(pwd)
ZV_FUZZ_EMBED="embed/tokenizer.cc embed/unicode.cc embed/unicode_tables.cc base/status.cc"

SOURCES[tokenizer]="tests/fuzz/tokenizer_fuzzer.cc $ZV_FUZZ_EMBED"
LIBS[tokenizer]="-DZV_SOURCE_ROOT=\"$ZV_FUZZ_ROOT\""

SOURCES[checkpoint]="tests/fuzz/checkpoint_fuzzer.cc embed/checkpoint.cc embed/safetensors.cc $ZV_FUZZ_EMBED"
LIBS[checkpoint]=""

SOURCES[corpus_reader]="tests/fuzz/corpus_reader_fuzzer.cc tools/corpus_reader.cc base/status.cc"
LIBS[corpus_reader]=""

ZV_FUZZ_PROTO_OUT="${OUT:-/tmp/zerovec-fuzz}/proto_gen"
mkdir -p "$ZV_FUZZ_PROTO_OUT"
if protoc --proto_path=proto --cpp_out="$ZV_FUZZ_PROTO_OUT" \
    proto/zerovec/v1/zerovec.proto 2>"$ZV_FUZZ_PROTO_OUT/protoc.log"; then
  # service/validation.cc needs index::ValidateCollectionName from index/validate.cc;
  # tests/fuzz/index_name_shim.cc stubs the two FAISS-side symbols the rest of
  # that file references (the fuzzer never calls them).
  SOURCES[request_validation]="tests/fuzz/request_validation_fuzzer.cc service/validation.cc \
index/validate.cc tests/fuzz/index_name_shim.cc $ZV_FUZZ_PROTO_OUT/zerovec/v1/zerovec.pb.cc base/status.cc \
-I$ZV_FUZZ_PROTO_OUT"
  LIBS[request_validation]="-lprotobuf -pthread"
else
  # Registered anyway so the build step reports the failure as a FAIL line.
  SOURCES[request_validation]="tests/fuzz/request_validation_fuzzer.cc"
  LIBS[request_validation]="-DZV_PROTOC_FAILED"
fi
