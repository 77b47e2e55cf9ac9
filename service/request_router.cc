#include "service/request_router.h"

#include <grpcpp/impl/codegen/method_handler.h>
#include <grpcpp/impl/codegen/rpc_service_method.h>

namespace zv::service {
namespace {

namespace pb = zerovec::v1;
using Impl = pb::ZeroVec::Service;

// Request and response as their own base types: SerializationTraits of the
// request type itself, not of MessageLite.
template <class Req, class Resp>
grpc::internal::RpcServiceMethod* Unary(
    const char* name, Impl* impl,
    grpc::Status (Impl::*method)(grpc::ServerContext*, const Req*, Resp*)) {
  return new grpc::internal::RpcServiceMethod(
      name, grpc::internal::RpcMethod::NORMAL_RPC,
      new grpc::internal::RpcMethodHandler<Impl, Req, Resp, Req, Resp>(
          [method](Impl* service, grpc::ServerContext* ctx, const Req* req,
                   Resp* resp) { return (service->*method)(ctx, req, resp); },
          impl));
}

}  // namespace

RequestRouter::RequestRouter(Impl* impl) {
  const auto add = [&](grpc::internal::RpcServiceMethod* m) {
    AddMethod(m);
    ++routed_;
  };
  add(Unary("/zerovec.v1.ZeroVec/CreateCollection", impl,
            &Impl::CreateCollection));
  add(Unary("/zerovec.v1.ZeroVec/DropCollection", impl, &Impl::DropCollection));
  add(Unary("/zerovec.v1.ZeroVec/ListCollections", impl,
            &Impl::ListCollections));
  add(Unary("/zerovec.v1.ZeroVec/DescribeCollection", impl,
            &Impl::DescribeCollection));
  add(Unary("/zerovec.v1.ZeroVec/Upsert", impl, &Impl::Upsert));
  // Streamed messages go through SerializationTraits<UpsertRequest> already,
  // but a refused one ends the handler's Read loop as the stream's end would:
  // the reason, from this thread's parse log, replaces its OK.
  add(new grpc::internal::RpcServiceMethod(
      "/zerovec.v1.ZeroVec/UpsertStream",
      grpc::internal::RpcMethod::CLIENT_STREAMING,
      new grpc::internal::ClientStreamingHandler<Impl, pb::UpsertRequest,
                                                 pb::UpsertResponse>(
          [](Impl* service, grpc::ServerContext* ctx,
             grpc::ServerReader<pb::UpsertRequest>* reader,
             pb::UpsertResponse* resp) {
            ParseLog& log = ThisThreadParseLog();
            log = {};
            grpc::Status s = service->UpsertStream(ctx, reader, resp);
            if (!s.ok() || !log.refused) return s;
            return grpc::Status(
                static_cast<grpc::StatusCode>(log.refused->code()),
                "message " + std::to_string(log.parsed) + " (the " +
                    std::to_string(resp->upserted()) +
                    " items of earlier messages are stored): " +
                    log.refused->message());
          },
          impl)));
  add(Unary("/zerovec.v1.ZeroVec/Search", impl, &Impl::Search));
  add(Unary("/zerovec.v1.ZeroVec/SearchBatch", impl, &Impl::SearchBatch));
  add(Unary("/zerovec.v1.ZeroVec/Get", impl, &Impl::Get));
  add(Unary("/zerovec.v1.ZeroVec/Delete", impl, &Impl::Delete));
  add(Unary("/zerovec.v1.ZeroVec/Embed", impl, &Impl::Embed));
  add(Unary("/zerovec.v1.ZeroVec/Stats", impl, &Impl::Stats));
  add(Unary("/zerovec.v1.ZeroVec/Compact", impl, &Impl::Compact));
  add(Unary("/zerovec.v1.ZeroVec/Touch", impl, &Impl::Touch));
  add(Unary("/zerovec.v1.ZeroVec/Scan", impl, &Impl::Scan));
}

Status RequestRouter::CheckCoversProto() const {
  const auto* proto =
      pb::UpsertRequest::descriptor()->file()->FindServiceByName("ZeroVec");
  if (proto == nullptr || proto->method_count() != routed_) {
    return InternalError(
        "service/request_router.cc routes " + std::to_string(routed_) +
        " RPCs but zerovec.v1.ZeroVec has " +
        std::to_string(proto ? proto->method_count() : 0) + "; route them all");
  }
  return OkStatus();
}

}  // namespace zv::service
