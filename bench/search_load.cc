// Text search load against a running `zerovec serve` (a benchmark, not a
// test): for each client count, that many concurrent clients send text Search
// requests (queries drawn in turn from a file, one a line) for a fixed time;
// prints QPS and p50/p99 latency, one line per client count.
//
//   search_load --server 127.0.0.1:50051 --collection docs --queries q.txt \
//       --clients 1,16,64 --seconds 10 [--k 10]
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "zerovec/v1/zerovec.grpc.pb.h"

namespace {

namespace pb = zerovec::v1;
using Clock = std::chrono::steady_clock;

double Percentile(std::vector<double>& v, double p) {
  if (v.empty()) return 0;
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(p * v.size()));
  std::nth_element(v.begin(), v.begin() + i, v.end());
  return v[i];
}

}  // namespace

int main(int argc, char** argv) {
  std::map<std::string, std::string> kv;
  for (int i = 1; i + 1 < argc; i += 2) kv[argv[i]] = argv[i + 1];
  if (!kv.count("--server") || !kv.count("--collection") ||
      !kv.count("--queries")) {
    std::fprintf(stderr,
                 "usage: search_load --server HOST:PORT --collection NAME "
                 "--queries FILE [--clients 1,16,64] [--seconds 10] [--k "
                 "10]\n");
    return 2;
  }
  const int seconds = kv.count("--seconds") ? std::stoi(kv["--seconds"]) : 10;
  const int k = kv.count("--k") ? std::stoi(kv["--k"]) : 10;
  std::vector<int> client_counts;
  std::stringstream list(kv.count("--clients") ? kv["--clients"] : "1,16,64");
  for (std::string item; std::getline(list, item, ',');) {
    client_counts.push_back(std::stoi(item));
  }
  std::vector<std::string> queries;
  std::ifstream in(kv["--queries"]);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) queries.push_back(line);
  }
  if (queries.empty()) {
    std::fprintf(stderr, "search_load: no queries in %s\n",
                 kv["--queries"].c_str());
    return 1;
  }
  std::printf("clients  qps       p50_ms   p99_ms   errors\n");
  for (int clients : client_counts) {
    std::vector<std::vector<double>> lat(clients);
    std::vector<uint64_t> errors(clients, 0);
    std::vector<std::thread> threads;
    const auto end = Clock::now() + std::chrono::seconds(seconds);
    for (int t = 0; t < clients; ++t) {
      threads.emplace_back([&, t] {
        // A channel each, so clients do not share one HTTP/2 connection.
        grpc::ChannelArguments args;
        args.SetInt("grpc.use_local_subchannel_pool", 1);
        auto stub = pb::ZeroVec::NewStub(grpc::CreateCustomChannel(
            kv["--server"], grpc::InsecureChannelCredentials(), args));
        size_t next = static_cast<size_t>(t) * 7919;
        while (Clock::now() < end) {
          pb::SearchRequest req;
          req.set_collection(kv["--collection"]);
          req.mutable_query()->set_text(queries[next++ % queries.size()]);
          req.set_k(k);
          pb::SearchResponse resp;
          grpc::ClientContext ctx;
          ctx.set_deadline(std::chrono::system_clock::now() +
                           std::chrono::seconds(10));
          const auto t0 = Clock::now();
          const grpc::Status s = stub->Search(&ctx, req, &resp);
          lat[t].push_back(
              std::chrono::duration<double, std::milli>(Clock::now() - t0)
                  .count());
          if (!s.ok() || resp.hits_size() == 0) ++errors[t];
        }
      });
    }
    const auto start = Clock::now();
    for (auto& th : threads) th.join();
    const double secs =
        std::chrono::duration<double>(Clock::now() - start).count();
    std::vector<double> all;
    uint64_t errs = 0;
    for (int t = 0; t < clients; ++t) {
      all.insert(all.end(), lat[t].begin(), lat[t].end());
      errs += errors[t];
    }
    const double qps = all.size() / secs;
    std::printf("%-8d %-9.0f %-8.3f %-8.3f %llu\n", clients, qps,
                Percentile(all, 0.5), Percentile(all, 0.99),
                static_cast<unsigned long long>(errs));
    std::fflush(stdout);
  }
  return 0;
}
