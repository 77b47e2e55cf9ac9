#include "service/auth.h"

#include <string>

namespace zv::service {
namespace {

constexpr std::string_view kHealthPrefix = "/grpc.health.v1.Health/";
constexpr std::string_view kZeroVecPrefix = "/zerovec.v1.ZeroVec/";

class AuthInterceptor : public grpc::experimental::Interceptor {
 public:
  AuthInterceptor(const BearerAuth* auth,
                  grpc::experimental::ServerRpcInfo* info)
      : auth_(auth), info_(info) {}

  void Intercept(
      grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::
                POST_RECV_INITIAL_METADATA)) {
      std::string_view header;
      auto* md = methods->GetRecvInitialMetadata();
      auto it = md->find("authorization");
      if (it != md->end())
        header = std::string_view(it->second.data(), it->second.size());
      if (!auth_->Check(header)) info_->server_context()->TryCancel();
    }
    methods->Proceed();
  }

 private:
  const BearerAuth* auth_;
  grpc::experimental::ServerRpcInfo* info_;
};

class AuthInterceptorFactory
    : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  explicit AuthInterceptorFactory(const BearerAuth* auth) : auth_(auth) {}
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override {
    std::string_view method = info->method();
    if (!auth_->enabled() || method.starts_with(kHealthPrefix) ||
        method.starts_with(kZeroVecPrefix)) {
      return nullptr;
    }
    return new AuthInterceptor(auth_, info);
  }

 private:
  const BearerAuth* auth_;
};

}  // namespace

bool ConstantTimeEquals(std::string_view a, std::string_view b) {
  // Walk the longer length so the time does not reveal a matching prefix.
  const size_t n = std::max(a.size(), b.size());
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff |= x ^ y;
  }
  // Keep the compiler from short-circuiting the loop.
  volatile unsigned char result = diff;
  return result == 0;
}

BearerAuth::BearerAuth(std::optional<std::string> token) {
  if (token) expected_ = "Bearer " + *token;
}

bool BearerAuth::Check(std::string_view authorization_header) const {
  if (!expected_) return true;
  return ConstantTimeEquals(authorization_header, *expected_);
}

bool BearerAuth::Check(const grpc::ServerContext& context) const {
  if (!expected_) return true;
  const auto& md = context.client_metadata();
  auto it = md.find("authorization");
  if (it == md.end()) return false;
  return Check(std::string_view(it->second.data(), it->second.size()));
}

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>
MakeAuthInterceptorFactory(const BearerAuth* auth) {
  return std::make_unique<AuthInterceptorFactory>(auth);
}

}  // namespace zv::service
