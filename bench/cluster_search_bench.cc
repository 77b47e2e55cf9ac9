// Vector search load against one server or the nodes of a cluster (a
// benchmark, not a test): creates COLLECTION (with --shards S: a cluster
// collection, replication 1), upserts --rows N deterministic unit vectors,
// then for each client count that many clients send vector Search requests
// (k 10) for --seconds, spread over the --servers in turn; prints QPS and
// p50/p99 latency. bench/cluster_bench.sh runs it at 1, 2 and 4 nodes.
//
//   cluster_search_bench --servers 127.0.0.1:5001,127.0.0.1:5002 \
//       --collection c --shards 2 --rows 100000 --dim 128 --clients 1,8 \
//       --seconds 10
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "zerovec/v1/zerovec.grpc.pb.h"

namespace {

namespace pb = zerovec::v1;
using Clock = std::chrono::steady_clock;

std::vector<std::string> Split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');) out.push_back(item);
  return out;
}

void RandomUnit(std::mt19937_64& rng, int dim, pb::Vector* out) {
  std::normal_distribution<float> g;
  std::vector<float> v(dim);
  double norm = 0;
  for (float& x : v) norm += (x = g(rng)) * x;
  for (float& x : v) out->add_values(static_cast<float>(x / std::sqrt(norm)));
}

std::unique_ptr<pb::ZeroVec::Stub> StubFor(const std::string& address) {
  grpc::ChannelArguments args;
  args.SetInt("grpc.use_local_subchannel_pool", 1);  // a connection each
  return pb::ZeroVec::NewStub(grpc::CreateCustomChannel(
      address, grpc::InsecureChannelCredentials(), args));
}

bool Load(pb::ZeroVec::Stub* stub, const std::string& coll, int shards,
          int rows, int dim) {
  pb::CreateCollectionRequest create;
  create.set_name(coll);
  create.set_dim(dim);
  create.set_shards(shards);
  pb::CreateCollectionResponse created;
  grpc::ClientContext c0;
  grpc::Status s = stub->CreateCollection(&c0, create, &created);
  if (!s.ok()) {
    std::fprintf(stderr, "create: %s\n", s.error_message().c_str());
    return false;
  }
  std::mt19937_64 rng(42);
  for (int from = 0; from < rows; from += 500) {
    pb::UpsertRequest req;
    req.set_collection(coll);
    for (int i = from; i < std::min(rows, from + 500); ++i) {
      auto* item = req.add_items();
      item->set_id("r" + std::to_string(i));
      pb::Vector v;
      RandomUnit(rng, dim, &v);
      *item->mutable_vector() = v.values();
    }
    pb::UpsertResponse resp;
    grpc::ClientContext ctx;
    s = stub->Upsert(&ctx, req, &resp);
    if (!s.ok()) {
      std::fprintf(stderr, "upsert: %s\n", s.error_message().c_str());
      return false;
    }
  }
  return true;
}

double Percentile(std::vector<double>& v, double p) {
  if (v.empty()) return 0;
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(p * v.size()));
  std::nth_element(v.begin(), v.begin() + i, v.end());
  return v[i];
}

void Measure(const std::vector<std::string>& servers, const std::string& coll,
             int dim, int clients, int seconds) {
  std::vector<std::vector<double>> lat(clients);
  std::vector<int> errors(clients, 0);
  std::vector<std::thread> threads;
  const auto end = Clock::now() + std::chrono::seconds(seconds);
  for (int t = 0; t < clients; ++t) {
    threads.emplace_back([&, t] {
      auto stub = StubFor(servers[t % servers.size()]);
      std::mt19937_64 rng(1000 + t);
      while (Clock::now() < end) {
        pb::SearchRequest req;
        req.set_collection(coll);
        RandomUnit(rng, dim, req.mutable_query()->mutable_vector());
        req.set_k(10);
        pb::SearchResponse resp;
        grpc::ClientContext ctx;
        ctx.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::seconds(10));
        const auto t0 = Clock::now();
        const grpc::Status s = stub->Search(&ctx, req, &resp);
        lat[t].push_back(
            std::chrono::duration<double, std::milli>(Clock::now() - t0)
                .count());
        if (!s.ok() || resp.hits_size() != 10) ++errors[t];
      }
    });
  }
  const auto start = Clock::now();
  for (auto& th : threads) th.join();
  const double secs =
      std::chrono::duration<double>(Clock::now() - start).count();
  std::vector<double> all;
  int errs = 0;
  for (int t = 0; t < clients; ++t) {
    all.insert(all.end(), lat[t].begin(), lat[t].end());
    errs += errors[t];
  }
  std::printf("%-8d %-9.0f %-8.3f %-8.3f %d\n", clients, all.size() / secs,
              Percentile(all, 0.5), Percentile(all, 0.99), errs);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  std::map<std::string, std::string> kv;
  for (int i = 1; i + 1 < argc; i += 2) kv[argv[i]] = argv[i + 1];
  if (!kv.count("--servers") || !kv.count("--collection")) {
    std::fprintf(stderr,
                 "usage: cluster_search_bench --servers H:P[,H:P...] "
                 "--collection NAME [--shards S] [--rows N] [--dim D] "
                 "[--clients 1,8] [--seconds 10]\n");
    return 2;
  }
  const auto servers = Split(kv["--servers"]);
  const int shards = kv.count("--shards") ? std::stoi(kv["--shards"]) : 0;
  const int rows = kv.count("--rows") ? std::stoi(kv["--rows"]) : 100000;
  const int dim = kv.count("--dim") ? std::stoi(kv["--dim"]) : 128;
  const int seconds = kv.count("--seconds") ? std::stoi(kv["--seconds"]) : 10;
  if (!Load(StubFor(servers[0]).get(), kv["--collection"], shards, rows, dim))
    return 1;
  std::printf("clients  qps       p50_ms   p99_ms   errors\n");
  for (const auto& c : Split(kv.count("--clients") ? kv["--clients"] : "1,8"))
    Measure(servers, kv["--collection"], dim, std::stoi(c), seconds);
  return 0;
}
