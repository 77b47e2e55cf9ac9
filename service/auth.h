// Bearer-token authentication for the gRPC service.
#ifndef ZEROVEC_SERVICE_AUTH_H_
#define ZEROVEC_SERVICE_AUTH_H_

#include <grpcpp/server_context.h>
#include <grpcpp/support/server_interceptor.h>

#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace zv::service {

// Compares in time that depends only on the lengths, never on where a and b
// differ.
bool ConstantTimeEquals(std::string_view a, std::string_view b);

// Checks "authorization: Bearer <token>" metadata. No token configured: all
// pass.
class BearerAuth {
 public:
  explicit BearerAuth(std::optional<std::string> token);
  bool enabled() const { return expected_.has_value(); }
  // True when auth is off or `authorization_header` carries the token.
  bool Check(std::string_view authorization_header) const;
  bool Check(const grpc::ServerContext& context) const;

 private:
  std::optional<std::string> expected_;  // "Bearer <token>"
};

// Guards services the server does not implement itself (server reflection): a
// call without a valid token is cancelled before its handler sees any message.
// Our ZeroVec methods check the token themselves (to answer UNAUTHENTICATED)
// and the health service is exempt.
std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>
MakeAuthInterceptorFactory(const BearerAuth* auth);

}  // namespace zv::service

#endif  // ZEROVEC_SERVICE_AUTH_H_
