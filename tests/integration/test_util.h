// Helpers for tests that run a real ZeroVec server on 127.0.0.1 (port 0) and
// talk to it through real gRPC stubs.
#ifndef ZEROVEC_TESTS_INTEGRATION_TEST_UTIL_H_
#define ZEROVEC_TESTS_INTEGRATION_TEST_UTIL_H_

#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "base/test_util.h"  // MakeTempDir, Cosine
#include "service/server.h"
#include "zerovec/v1/zerovec.grpc.pb.h"

namespace zv::testing {

// A deterministic unit vector for `id` (FNV hash seeded), dimension `dim`.
std::vector<float> VectorFor(const std::string& id, uint32_t dim);

// The bundled model folder if the test has it (models/zerovec-mini in runfiles
// or $ZEROVEC_TEST_MODEL), else empty.
std::filesystem::path BundledModelDir();

struct RunningServer {
  std::unique_ptr<service::Server> server;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<zerovec::v1::ZeroVec::Stub> stub;
  std::string address;  // 127.0.0.1:<port>
};

// Starts a server on 127.0.0.1:0 over `options` (listen is overridden). Fails
// the test (ADD_FAILURE) and returns a null server on error.
RunningServer StartServer(service::ServerOptions options);

// An Item with id, vector and optional namespace / metadata.
zerovec::v1::Item VectorItem(const std::string& id, const std::vector<float>& v,
                             const std::string& ns = "");

// Raw calls for services we have no generated stubs for (health, reflection).
grpc::Status RawUnaryCall(grpc::Channel* channel, const std::string& method,
                          const std::string& request, std::string* response,
                          grpc::ClientContext* ctx);
grpc::Status RawBidiCall(grpc::Channel* channel, const std::string& method,
                         const std::string& request, std::string* response,
                         grpc::ClientContext* ctx);

}  // namespace zv::testing

#endif  // ZEROVEC_TESTS_INTEGRATION_TEST_UTIL_H_
