// How the server reads zerovec.v1 requests off the wire: protobuf's parse, and
// when it fails, service::DiagnoseUnparsedRequest's reason (e.g.
// "items[3].text: not valid UTF-8 (byte 5)", INVALID_ARGUMENT) instead of
// gRPC's INTERNAL with an empty message. Included by zerovec.grpc.pb.h
// (grpc_cpp_plugin's additional_header_includes), so every user of the service
// and stubs sees these specializations.
#ifndef ZEROVEC_PROTO_ZEROVEC_V1_REQUEST_TRAITS_H_
#define ZEROVEC_PROTO_ZEROVEC_V1_REQUEST_TRAITS_H_

#include <grpcpp/impl/codegen/proto_utils.h>
#include <grpcpp/support/byte_buffer.h>

#include <string>
#include <vector>

#include "service/wire_check.h"
#include "zerovec/v1/zerovec.pb.h"

namespace zv::service {

template <class T>
class RequestSerializationTraits {
 public:
  static grpc::Status Serialize(const T& msg, grpc::ByteBuffer* bb,
                                bool* own_buffer) {
    return grpc::GenericSerialize<grpc::ProtoBufferWriter, T>(msg, bb,
                                                              own_buffer);
  }

  static grpc::Status Deserialize(grpc::ByteBuffer* buffer, T* msg) {
    if (buffer == nullptr)
      return grpc::GenericDeserialize<grpc::ProtoBufferReader, T>(buffer, msg);
    // A second reference to the same slices (no copy): the parse clears
    // `buffer`, the diagnosis needs the bytes.
    grpc::ByteBuffer kept(*buffer);
    grpc::Status s =
        grpc::GenericDeserialize<grpc::ProtoBufferReader, T>(buffer, msg);
    ParseLog& log = ThisThreadParseLog();
    if (s.ok()) {
      ++log.parsed;
      return s;
    }
    std::vector<grpc::Slice> slices;
    std::string wire;
    if (kept.Dump(&slices).ok()) {
      for (const grpc::Slice& slice : slices)
        wire.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
    }
    const Status why = DiagnoseUnparsedRequest(wire, *T::descriptor());
    log.refused = why;
    return grpc::Status(static_cast<grpc::StatusCode>(why.code()),
                        why.message());
  }
};

}  // namespace zv::service

#define ZV_REQUEST_SERIALIZATION_TRAITS(T)              \
  template <>                                           \
  class grpc::SerializationTraits<zerovec::v1::T, void> \
      : public zv::service::RequestSerializationTraits<zerovec::v1::T> {};

ZV_REQUEST_SERIALIZATION_TRAITS(CreateCollectionRequest)
ZV_REQUEST_SERIALIZATION_TRAITS(DropCollectionRequest)
ZV_REQUEST_SERIALIZATION_TRAITS(ListCollectionsRequest)
ZV_REQUEST_SERIALIZATION_TRAITS(DescribeCollectionRequest)
ZV_REQUEST_SERIALIZATION_TRAITS(UpsertRequest)
ZV_REQUEST_SERIALIZATION_TRAITS(SearchRequest)
ZV_REQUEST_SERIALIZATION_TRAITS(SearchBatchRequest)
ZV_REQUEST_SERIALIZATION_TRAITS(GetRequest)
ZV_REQUEST_SERIALIZATION_TRAITS(DeleteRequest)
ZV_REQUEST_SERIALIZATION_TRAITS(EmbedRequest)
ZV_REQUEST_SERIALIZATION_TRAITS(StatsRequest)
ZV_REQUEST_SERIALIZATION_TRAITS(CompactRequest)

#undef ZV_REQUEST_SERIALIZATION_TRAITS

#endif  // ZEROVEC_PROTO_ZEROVEC_V1_REQUEST_TRAITS_H_
