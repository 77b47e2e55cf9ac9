#include "tests/integration/test_util.h"

#include <grpcpp/impl/codegen/client_unary_call.h>
#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/sync_stream.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstdlib>

namespace zv::testing {

std::vector<float> VectorFor(const std::string& id, uint32_t dim) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : id) h = (h ^ c) * 1099511628211ull;
  std::vector<float> v(dim);
  double norm = 0;
  for (uint32_t i = 0; i < dim; ++i) {
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 29;
    v[i] = static_cast<float>(static_cast<double>(h % 20001) / 10000.0 - 1.0);
    norm += v[i] * v[i];
  }
  const float inv = norm > 0 ? static_cast<float>(1.0 / std::sqrt(norm)) : 1.0f;
  for (float& x : v) x *= inv;
  return v;
}

std::filesystem::path BundledModelDir() {
  if (const char* env = std::getenv("ZEROVEC_TEST_MODEL")) {
    if (std::filesystem::exists(std::filesystem::path(env) / "config.json"))
      return env;
  }
  for (const char* candidate :
       {"models/zerovec-mini", "../models/zerovec-mini"}) {
    if (std::filesystem::exists(std::filesystem::path(candidate) /
                                "config.json")) {
      return std::filesystem::absolute(candidate);
    }
  }
  return {};
}

RunningServer StartServer(service::ServerOptions options) {
  options.listen = "127.0.0.1:0";
  RunningServer rs;
  auto server = service::Server::Start(options);
  if (!server.ok()) {
    ADD_FAILURE() << "server start: " << server.status();
    return rs;
  }
  rs.server = std::move(server).value();
  rs.address = "127.0.0.1:" + std::to_string(rs.server->port());
  rs.channel =
      grpc::CreateChannel(rs.address, grpc::InsecureChannelCredentials());
  rs.stub = zerovec::v1::ZeroVec::NewStub(rs.channel);
  return rs;
}

zerovec::v1::Item VectorItem(const std::string& id, const std::vector<float>& v,
                             const std::string& ns) {
  zerovec::v1::Item item;
  item.set_id(id);
  item.mutable_vector()->Add(v.begin(), v.end());
  item.set_namespace_(ns);
  item.set_text("doc " + id);
  return item;
}

namespace {
grpc::ByteBuffer ToBuffer(const std::string& bytes) {
  grpc::Slice slice(bytes.data(), bytes.size());
  return grpc::ByteBuffer(&slice, 1);
}
std::string FromBuffer(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  (void)buffer.Dump(&slices);
  std::string out;
  for (const auto& s : slices)
    out.append(reinterpret_cast<const char*>(s.begin()), s.size());
  return out;
}
}  // namespace

grpc::Status RawUnaryCall(grpc::Channel* channel, const std::string& method,
                          const std::string& request, std::string* response,
                          grpc::ClientContext* ctx) {
  grpc::ByteBuffer resp;
  grpc::Status s =
      grpc::internal::BlockingUnaryCall<grpc::ByteBuffer, grpc::ByteBuffer>(
          channel,
          grpc::internal::RpcMethod(method.c_str(),
                                    grpc::internal::RpcMethod::NORMAL_RPC),
          ctx, ToBuffer(request), &resp);
  if (s.ok()) *response = FromBuffer(resp);
  return s;
}

grpc::Status RawBidiCall(grpc::Channel* channel, const std::string& method,
                         const std::string& request, std::string* response,
                         grpc::ClientContext* ctx) {
  grpc::internal::RpcMethod rpc(method.c_str(),
                                grpc::internal::RpcMethod::BIDI_STREAMING);
  std::unique_ptr<grpc::ClientReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>>
      stream(grpc::internal::ClientReaderWriterFactory<
             grpc::ByteBuffer, grpc::ByteBuffer>::Create(channel, rpc, ctx));
  stream->Write(ToBuffer(request));
  stream->WritesDone();
  grpc::ByteBuffer resp;
  while (stream->Read(&resp)) response->append(FromBuffer(resp));
  return stream->Finish();
}

}  // namespace zv::testing
