// zerovec.v1.ZeroVec's methods registered as the generated ZeroVec::Service
// registers them, except that each unary request is read through
// SerializationTraits<Request> (zerovec/v1/request_traits.h) rather than the
// shared MessageLite one the generated code uses: a request protobuf refuses
// (invalid UTF-8) then gets INVALID_ARGUMENT naming the field, not INTERNAL
// with an empty message. Every call goes to `impl`'s handler unchanged.
#ifndef ZEROVEC_SERVICE_REQUEST_ROUTER_H_
#define ZEROVEC_SERVICE_REQUEST_ROUTER_H_

#include <grpcpp/impl/service_type.h>

#include "base/status.h"
#include "zerovec/v1/zerovec.grpc.pb.h"

namespace zv::service {

class RequestRouter final : public grpc::Service {
 public:
  explicit RequestRouter(zerovec::v1::ZeroVec::Service* impl);

  // INTERNAL unless every RPC of the proto's ZeroVec service is routed (a new
  // RPC must be added here too); checked when the server starts.
  Status CheckCoversProto() const;

 private:
  int routed_ = 0;
};

}  // namespace zv::service

#endif  // ZEROVEC_SERVICE_REQUEST_ROUTER_H_
