// GPU search through the real server (issue 13; a benchmark, not a test):
//   1. writes ROWS random unit rows x DIM into a fresh data dir in process
//      (index::Database bulk append: no gRPC, no JSON);
//   2. starts `zerovec serve --model none --gpu-memory auto` on it and times
//      the start, reading the mirror's upload time from the server's log;
//   3. unless --restart-only: N concurrent clients (a channel each) send
//      single-vector Search requests (k=10) for --seconds, per client count,
//      with --gpu-batch-window-us W and with 0 (coalescing off): QPS, p50,
//      p99, and the server's GPU batches (queries per batch).
//
//   4. with --model DIR --text: the clients send text queries instead (dim
//      must be the model's), the server started with that model on the GPU
//      and --gpu-text-queries device (embedded into GPU memory and searched
//      from there) and again with host (embedded to the host, coalesced).
//
//   5. with --devices "A;B;...": the whole of 2-4 once per entry, the server
//      started with `--devices A` (issue 19: the mirror split over those
//      GPUs), "-" for none (the single-GPU code, --gpu-device 0), all on the
//      same data, so the N = 1 path and the split path run side by side.
//
//   gpu_serve_bench --zerovec bin/zerovec --rows 1000000 [--dim 384]
//       [--clients 1,16,64,256] [--seconds 5] [--window-us 500]
//       [--restart-only] [--dir /tmp/zv-gpu-serve] [--model DIR --text]
//       [--devices "-;cuda:0;all;cuda:0,cuda:0"]
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "index/collection.h"
#include "zerovec/v1/zerovec.grpc.pb.h"

namespace {

namespace fs = std::filesystem;
namespace pb = zerovec::v1;
using Clock = std::chrono::steady_clock;

double Since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// A unit vector from a counter-seeded xorshift (fast: 10M rows in seconds).
void RandomUnit(uint64_t seed, float* out, uint32_t dim) {
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  double norm = 0;
  for (uint32_t d = 0; d < dim; ++d) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    out[d] = static_cast<float>((x >> 40) * (1.0 / (1 << 24)) - 0.5);
    norm += double(out[d]) * out[d];
  }
  const float inv = static_cast<float>(1 / std::sqrt(norm));
  for (uint32_t d = 0; d < dim; ++d) out[d] *= inv;
}

bool MakeData(const fs::path& data, uint64_t rows, uint32_t dim) {
  auto db = zv::index::Database::Open(data);
  if (!db.ok()) return false;
  zv::index::CollectionOptions o;
  o.dim = dim;
  o.rows_per_extent = 1 << 20;
  auto coll = (*db)->CreateCollection("bench", o);
  if (!coll.ok()) return false;
  auto app = (*coll)->StartBulkAppend();
  if (!app.ok()) return false;
  const uint64_t batch = 65536;
  const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  for (uint64_t first = 0; first < rows; first += batch) {
    const uint64_t n = std::min(batch, rows - first);
    std::vector<zv::index::Record> recs(n);
    for (uint64_t i = 0; i < n; ++i) {
      recs[i].id = "r" + std::to_string(first + i);
      recs[i].ns = "n" + std::to_string((first + i) % 8);
    }
    auto reserved = (*app)->Reserve(recs);
    if (!reserved.ok()) return false;
    std::vector<std::thread> pool;
    for (unsigned t = 0; t < threads; ++t) {
      pool.emplace_back([&, t] {
        for (uint64_t i = t; i < n; i += threads)
          RandomUnit(first + i, reserved->rows[i], dim);
      });
    }
    for (auto& th : pool) th.join();
    if (!(*app)->Commit(*reserved, recs).ok()) return false;
  }
  return (*app)->Finish().ok();
}

struct Child {
  pid_t pid = -1;
  int port = 0;
  double start_s = 0;
  std::string log;
};

// What the clients send and how the server embeds text queries.
struct Mode {
  std::string model = "none";
  bool text = false;
  std::string text_queries = "device";  // serve --gpu-text-queries
  std::string devices = "-";            // serve --devices; "-": not given
};

Child Serve(const std::string& zerovec, const fs::path& dir, int window_us,
            const Mode& mode) {
  Child c;
  const fs::path port_file = dir / "port";
  fs::remove(port_file);
  std::string tag = mode.devices == "-" ? "" : "-" + mode.devices;
  std::replace(tag.begin(), tag.end(), ',', '+');
  c.log = (dir / ("serve-" + std::to_string(window_us) + mode.text_queries +
                  tag + ".log"))
              .string();
  const auto t0 = Clock::now();
  c.pid = ::fork();
  if (c.pid == 0) {
    const std::string data = (dir / "data").string(), pf = port_file.string();
    const std::string w = std::to_string(window_us);
    freopen(c.log.c_str(), "w", stderr);
    std::vector<const char*> args = {zerovec.c_str(),
                                     "serve",
                                     "--data",
                                     data.c_str(),
                                     "--listen",
                                     "127.0.0.1:0",
                                     "--model",
                                     mode.model.c_str(),
                                     "--port-file",
                                     pf.c_str(),
                                     "--max-concurrent-requests",
                                     "4096",
                                     "--gpu-memory",
                                     "auto",
                                     "--gpu-batch-window-us",
                                     w.c_str(),
                                     "--gpu-text-queries",
                                     mode.text_queries.c_str()};
    if (mode.devices != "-") {
      args.push_back("--devices");
      args.push_back(mode.devices.c_str());
    }
    args.push_back(nullptr);
    execv(zerovec.c_str(), const_cast<char* const*>(args.data()));
    _exit(127);
  }
  for (int i = 0; i < 60000 && c.port == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    std::ifstream(port_file) >> c.port;
  }
  c.start_s = Since(t0);
  return c;
}

void Stop(Child& c) {
  kill(c.pid, SIGTERM);
  waitpid(c.pid, nullptr, 0);
}

std::string Grep(const std::string& file, const std::string& what) {
  std::ifstream in(file);
  std::string out;
  for (std::string line; std::getline(in, line);)
    if (line.find(what) != std::string::npos) out += line + "\n";
  return out;
}

std::shared_ptr<grpc::Channel> OwnChannel(int port) {
  grpc::ChannelArguments args;
  args.SetInt("grpc.use_local_subchannel_pool", 1);
  return grpc::CreateCustomChannel("127.0.0.1:" + std::to_string(port),
                                   grpc::InsecureChannelCredentials(), args);
}

double Percentile(std::vector<double>& v, double p) {
  if (v.empty()) return 0;
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(p * v.size()));
  std::nth_element(v.begin(), v.begin() + i, v.end());
  return v[i];
}

void Load(int port, int clients, int seconds, uint32_t dim, int window_us,
          const Mode& mode) {
  std::vector<std::vector<double>> lat(clients);
  std::vector<uint64_t> errors(clients, 0);
  std::vector<std::thread> threads;
  auto stats_of = [&] {
    auto stub = pb::ZeroVec::NewStub(OwnChannel(port));
    grpc::ClientContext ctx;
    pb::StatsResponse s;
    (void)stub->Stats(&ctx, pb::StatsRequest(), &s);
    return s;
  };
  const pb::StatsResponse before = stats_of();
  const auto start = Clock::now();
  const auto end = start + std::chrono::seconds(seconds);
  for (int t = 0; t < clients; ++t) {
    threads.emplace_back([&, t] {
      auto stub = pb::ZeroVec::NewStub(OwnChannel(port));
      std::vector<float> q(dim);
      for (uint64_t i = 0; Clock::now() < end; ++i) {
        pb::SearchRequest req;
        req.set_collection("bench");
        req.set_k(10);
        if (mode.text) {
          req.mutable_query()->set_text("what is the meaning of question " +
                                        std::to_string(t) + " number " +
                                        std::to_string(i));
        } else {
          RandomUnit(1000000007ull * (t + 1) + i, q.data(), dim);
          *req.mutable_query()->mutable_vector()->mutable_values() = {q.begin(),
                                                                      q.end()};
        }
        grpc::ClientContext ctx;
        pb::SearchResponse resp;
        const auto t0 = Clock::now();
        const bool ok = stub->Search(&ctx, req, &resp).ok();
        if (!ok || resp.hits_size() != 10) ++errors[t];
        lat[t].push_back(Since(t0) * 1e3);
      }
    });
  }
  for (auto& th : threads) th.join();
  const double secs = Since(start);
  const pb::StatsResponse after = stats_of();
  std::vector<double> all;
  uint64_t errs = 0;
  for (int t = 0; t < clients; ++t) {
    all.insert(all.end(), lat[t].begin(), lat[t].end());
    errs += errors[t];
  }
  const double n = all.size();
  const uint64_t batches = after.gpu_batches() - before.gpu_batches();
  const uint64_t queries =
      after.gpu_batched_queries() - before.gpu_batched_queries();
  std::printf(
      "RESULT %s%swindow_us=%d clients=%d qps=%.0f p50_ms=%.3f p99_ms=%.3f "
      "errors=%llu queries_per_gpu_batch=%.2f\n",
      mode.devices == "-" ? "" : ("devices=" + mode.devices + " ").c_str(),
      mode.text ? ("text_queries=" + mode.text_queries + " ").c_str() : "",
      window_us, clients, n / secs, Percentile(all, 0.5), Percentile(all, 0.99),
      static_cast<unsigned long long>(errs),
      batches ? double(queries) / batches : 0.0);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  std::map<std::string, std::string> kv;
  bool restart_only = false;
  Mode mode;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--restart-only") {
      restart_only = true;
    } else if (a == "--text") {
      mode.text = true;
    } else if (i + 1 < argc) {
      kv[a] = argv[++i];
    }
  }
  auto get = [&](const std::string& k, const std::string& d) {
    return kv.count(k) ? kv[k] : d;
  };
  const std::string zerovec = get("--zerovec", "bin/zerovec");
  const uint64_t rows = std::stoull(get("--rows", "1000000"));
  const uint32_t dim = std::stoul(get("--dim", "384"));
  const int seconds = std::stoi(get("--seconds", "5"));
  const int window = std::stoi(get("--window-us", "500"));
  mode.model = get("--model", "none");
  const fs::path dir =
      get("--dir", "/tmp/zv-gpu-serve-" + std::to_string(rows));
  fs::remove_all(dir);
  fs::create_directories(dir);

  const auto t0 = Clock::now();
  if (!MakeData(dir / "data", rows, dim)) {
    std::fprintf(stderr, "gpu_serve_bench: writing the data failed\n");
    return 1;
  }
  std::printf("RESULT data rows=%llu dim=%u written_s=%.1f\n",
              static_cast<unsigned long long>(rows), dim, Since(t0));
  std::fflush(stdout);

  // (devices, window, text query path) per server run.
  std::vector<std::string> device_runs;
  {
    std::stringstream list(get("--devices", "-"));
    for (std::string item; std::getline(list, item, ';');)
      device_runs.push_back(item);
  }
  std::vector<std::tuple<std::string, int, std::string>> runs;
  for (const std::string& devices : device_runs) {
    runs.push_back({devices, window, "device"});
    if (mode.text) {
      runs.push_back({devices, window, "host"});
    } else if (window != 0 && !restart_only && device_runs.size() == 1) {
      runs.push_back({devices, 0, "device"});
    }
  }
  for (const auto& [devices, w, text_queries] : runs) {
    mode.text_queries = text_queries;
    mode.devices = devices;
    Child c = Serve(zerovec, dir, w, mode);
    if (c.port == 0) {
      std::fprintf(stderr, "gpu_serve_bench: serve did not start:\n%s",
                   Grep(c.log, "").c_str());
      kill(c.pid, SIGKILL);
      return 1;
    }
    std::printf("RESULT restart %s%srows=%llu serving_after_s=%.2f\n%s",
                devices == "-" ? "" : "devices=",
                devices == "-" ? "" : (devices + " ").c_str(),
                static_cast<unsigned long long>(rows), c.start_s,
                Grep(c.log, "GPU").c_str());
    std::fflush(stdout);
    if (!restart_only) {
      std::stringstream list(get("--clients", "1,16,64,256"));
      for (std::string item; std::getline(list, item, ',');)
        Load(c.port, std::stoi(item), seconds, dim, w, mode);
    }
    Stop(c);
  }
  fs::remove_all(dir);
  return 0;
}
