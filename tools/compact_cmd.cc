// zerovec compact: drops a collection's tombstoned rows, through a server
// (the Compact RPC) or offline on a data directory no server holds.
#include <grpcpp/grpcpp.h>

#include <cstdio>
#include <iostream>

#include "index/collection.h"
#include "tools/cli_util.h"
#include "tools/commands.h"
#include "zerovec/v1/zerovec.grpc.pb.h"

namespace zv::tools {
namespace {

void PrintResult(const std::string& name, const index::CompactionResult& r) {
  char seconds[32];
  std::snprintf(seconds, sizeof(seconds), "%.3f", r.seconds);
  std::cout << "compacted collection " << name << ": " << r.rows_before
            << " -> " << r.rows_after << " rows (" << r.tombstones_removed
            << " tombstones removed), generation " << r.generation << ", "
            << seconds << " s\n";
}

Status CompactOnline(const Flags& flags, const std::string& name) {
  const std::string server = flags.Get("server");
  // Compaction rewrites the whole collection: a generous default deadline.
  ZV_ASSIGN_OR_RETURN(const int64_t timeout_s,
                      flags.GetInt("timeout-s", 3600, 1, 7 * 24 * 3600));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() +
                   std::chrono::seconds(timeout_s));
  if (flags.Has("auth-token-file")) {
    auto token = ReadSecretFile(flags.Get("auth-token-file"));
    if (!token.ok()) return FailedPreconditionError(token.status().message());
    ctx.AddMetadata("authorization", "Bearer " + *token);
  }
  auto stub = zerovec::v1::ZeroVec::NewStub(
      grpc::CreateChannel(server, grpc::InsecureChannelCredentials()));
  zerovec::v1::CompactRequest req;
  req.set_collection(name);
  zerovec::v1::CompactResponse resp;
  grpc::Status s = stub->Compact(&ctx, req, &resp);
  if (!s.ok()) return RpcError(server, s.error_code(), s.error_message());
  index::CompactionResult r;
  r.rows_before = resp.rows_before();
  r.rows_after = resp.rows_after();
  r.tombstones_removed = resp.tombstones_removed();
  r.generation = resp.generation();
  r.seconds = resp.seconds();
  PrintResult(name, r);
  return OkStatus();
}

Status CompactOffline(const std::string& data, const std::string& name) {
  if (!std::filesystem::exists(std::filesystem::path(data) / "meta")) {
    return FailedPreconditionError("data " + data + ": not a data directory");
  }
  auto db = index::Database::Open(data);
  if (!db.ok()) {
    return DataDirOpenError(
        data, db.status(),
        "compact through it with --server ADDR, or stop it first");
  }
  auto coll = (*db)->GetCollection(name);
  if (!coll.ok()) return FailedPreconditionError(coll.status().message());
  auto result = (*coll)->Compact();
  if (!result.ok()) return result.status().WithContext("compact " + name);
  PrintResult(name, *result);
  return OkStatus();
}

Status Compact(const Flags& flags) {
  ZV_ASSIGN_OR_RETURN(const std::string name, flags.Require("collection"));
  ZV_RETURN_IF_ERROR(index::ValidateCollectionName(name));
  if (flags.Has("server") == flags.Has("data")) {
    return InvalidArgumentError(
        "give exactly one of --server ADDR (through a server) or --data DIR "
        "(offline)");
  }
  if (flags.Has("data") &&
      (flags.Has("auth-token-file") || flags.Has("timeout-s"))) {
    return InvalidArgumentError(
        "--auth-token-file and --timeout-s go with --server");
  }
  return flags.Has("server") ? CompactOnline(flags, name)
                             : CompactOffline(flags.Get("data"), name);
}

}  // namespace

int RunCompact(const std::vector<std::string>& args) {
  auto flags = Flags::Parse(
      args, {"server", "data", "collection", "auth-token-file", "timeout-s"},
      {});
  if (!flags.ok()) return Fail("compact", flags.status(), true);
  Status s = Compact(*flags);
  if (!s.ok()) return Fail("compact", s, IsUsageError(s));
  return 0;
}

}  // namespace zv::tools
