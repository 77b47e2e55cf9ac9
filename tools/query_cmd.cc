// zerovec query: a gRPC client for Search.
#include <grpcpp/grpcpp.h>

#include <iostream>

#include "index/collection.h"
#include "tools/cli_util.h"
#include "tools/commands.h"
#include "zerovec/v1/zerovec.grpc.pb.h"

namespace zv::tools {
namespace {

Status Query(const Flags& flags) {
  const std::string server = flags.Get("server", kDefaultListen);
  ZV_ASSIGN_OR_RETURN(const std::string collection,
                      flags.Require("collection"));
  ZV_ASSIGN_OR_RETURN(const int64_t k, flags.GetInt("k", 10, 1, index::kMaxK));
  // 0 = the index default; the server checks it against k.
  ZV_ASSIGN_OR_RETURN(const int64_t ef_search,
                      flags.GetInt("ef-search", 0, 0, index::kMaxEfSearch));
  ZV_ASSIGN_OR_RETURN(const int64_t timeout_s,
                      flags.GetInt("timeout-s", 30, 1, 3600));
  ZV_ASSIGN_OR_RETURN(const std::optional<index::Recency> recency,
                      RecencyFromFlags(flags));
  if (flags.Has("text") == flags.Has("vector-file")) {
    return InvalidArgumentError("give exactly one of --text or --vector-file");
  }
  ZV_ASSIGN_OR_RETURN(const index::SearchMode mode,
                      ParseSearchMode(flags.Get("mode", "dense")));
  ZV_ASSIGN_OR_RETURN(const index::FusionOptions fusion,
                      ParseFusionFlags(flags));
  if (mode != index::SearchMode::kDense && !flags.Has("text")) {
    return InvalidArgumentError("--mode " + flags.Get("mode") +
                                ": needs --text (a vector has no words)");
  }
  zerovec::v1::SearchRequest req;
  req.set_collection(collection);
  req.set_k(static_cast<int32_t>(k));
  req.set_ef_search(static_cast<int32_t>(ef_search));
  req.set_include_documents(true);
  if (recency) {
    req.mutable_recency()->set_half_life_ms(recency->half_life_ms);
    req.mutable_recency()->set_weight(recency->weight);
  }
  req.set_mode(
      mode == index::SearchMode::kLexical  ? zerovec::v1::SEARCH_MODE_LEXICAL
      : mode == index::SearchMode::kHybrid ? zerovec::v1::SEARCH_MODE_HYBRID
                                           : zerovec::v1::SEARCH_MODE_DENSE);
  req.mutable_fusion()->set_rrf_k(fusion.rrf_k);
  req.mutable_fusion()->set_dense_weight(fusion.dense_weight);
  req.mutable_fusion()->set_lexical_weight(fusion.lexical_weight);
  if (flags.Has("namespace"))
    req.mutable_filter()->set_namespace_(flags.Get("namespace"));
  if (flags.Has("text")) {
    req.mutable_query()->set_text(flags.Get("text"));
  } else {
    auto values = ReadVectorFile(flags.Get("vector-file"));
    if (!values.ok()) return FailedPreconditionError(values.status().message());
    req.mutable_query()->mutable_vector()->mutable_values()->Add(
        values->begin(), values->end());
  }

  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() +
                   std::chrono::seconds(timeout_s));
  if (flags.Has("auth-token-file")) {
    auto token = ReadSecretFile(flags.Get("auth-token-file"));
    if (!token.ok()) return FailedPreconditionError(token.status().message());
    ctx.AddMetadata("authorization", "Bearer " + *token);
  }
  auto channel =
      grpc::CreateChannel(server, grpc::InsecureChannelCredentials());
  auto stub = zerovec::v1::ZeroVec::NewStub(channel);
  zerovec::v1::SearchResponse resp;
  grpc::Status s = stub->Search(&ctx, req, &resp);
  if (!s.ok()) return RpcError(server, s.error_code(), s.error_message());
  std::vector<OutputHit> hits;
  for (const auto& h : resp.hits()) {
    hits.push_back({h.id(),
                    h.score(),
                    h.namespace_(),
                    h.text(),
                    {h.metadata().begin(), h.metadata().end()},
                    mode != index::SearchMode::kDense,
                    h.dense_rank(),
                    h.lexical_rank()});
  }
  PrintHits(hits, flags.Has("json"), std::cout);
  return OkStatus();
}

}  // namespace

StatusOr<std::optional<index::Recency>> RecencyFromFlags(const Flags& flags) {
  if (!flags.Has("recency-half-life-ms")) {
    if (flags.Has("recency-weight")) {
      return InvalidArgumentError(
          "--recency-weight needs --recency-half-life-ms");
    }
    return std::optional<index::Recency>();
  }
  index::Recency r;
  ZV_ASSIGN_OR_RETURN(r.half_life_ms,
                      flags.GetInt("recency-half-life-ms", 0, 1, INT64_MAX));
  ZV_ASSIGN_OR_RETURN(r.weight, flags.GetDouble("recency-weight", 0, 0, 1e6));
  return std::optional<index::Recency>(r);
}

int RunQuery(const std::vector<std::string>& args) {
  auto flags = Flags::Parse(
      args,
      {"server", "collection", "text", "vector-file", "k", "namespace",
       "auth-token-file", "timeout-s", "ef-search", "recency-half-life-ms",
       "recency-weight", "mode", "rrf-k", "dense-weight", "lexical-weight"},
      {"json"});
  if (!flags.ok()) return Fail("query", flags.status(), true);
  Status s = Query(*flags);
  if (!s.ok()) return Fail("query", s, IsUsageError(s));
  return 0;
}

}  // namespace zv::tools
