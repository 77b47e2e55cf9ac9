// Ingest throughput, text -> vectors a reader can search, two ways, with the
// same Embedder (CUDA), the same texts and the same chunk size:
//
//   zero-copy     SegmentSink::Embed writes each pooled row straight into the
//                 shm segment (registered mapping, or pinned staging where the
//                 mapping cannot be registered), then Writer::Commit publishes
//                 it. Done when a reader in ANOTHER process, attached before
//                 the start and spinning on shm::Reader::Refresh(), sees all N
//                 rows (and reads the last one).
//   conventional  Embedder::EmbedInto into ordinary host memory (the copy to
//                 the host), each vector copied into a zerovec.v1.UpsertRequest
//                 (protobuf), Upsert over loopback gRPC to a server in ANOTHER
//                 process, which the gRPC library deserialises and which copies
//                 each vector into a faiss::IndexFlatIP (add). Done when the
//                 last Upsert has answered, i.e. every row is in that index.
//
// Both start from an empty segment / index, neither pipelines chunks.
//   ingest_bench --model DIR --texts FILE --bucket medium --rows 65536
//                --chunks 1024,4096 --reps 3 --dir /tmp/zv_ingest --out
//                FILE.json
#include <faiss/IndexFlat.h>
#include <grpcpp/grpcpp.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "embed/embedder.h"
#include "embed/segment_sink.h"
#include "shm/segment.h"
#include "zerovec/v1/zerovec.grpc.pb.h"

using json = nlohmann::json;
namespace fs = std::filesystem;
namespace v1 = zerovec::v1;

namespace {

int64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC,
                &ts);  // system-wide: comparable across processes
  return int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "FATAL[%d]: %s\n", getpid(), what.c_str());
  std::fflush(stderr);
  _exit(1);
}
#define CHECK_OK(expr)                             \
  do {                                             \
    auto s_ = (expr);                              \
    if (!s_.ok()) Die(#expr ": " + s_.ToString()); \
  } while (0)

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Line-oriented pipe.
struct Pipe {
  int rfd = -1, wfd = -1;
  void Send(const std::string& line) {
    std::string s = line + "\n";
    if (write(wfd, s.data(), s.size()) != ssize_t(s.size())) Die("pipe write");
  }
  std::string Recv() {
    std::string s;
    char c;
    for (;;) {
      const ssize_t n = read(rfd, &c, 1);
      if (n <= 0) Die("pipe closed");
      if (c == '\n') return s;
      s.push_back(c);
    }
  }
};

// Two pipes between parent and child; call Fork-side fixups after fork.
struct Channel {
  int to_child[2], to_parent[2];
  Channel() {
    if (pipe(to_child) || pipe(to_parent)) Die("pipe");
  }
  Pipe ParentSide() {
    close(to_child[0]);
    close(to_parent[1]);
    return {to_parent[0], to_child[1]};
  }
  Pipe ChildSide() {
    close(to_child[1]);
    close(to_parent[0]);
    return {to_child[0], to_parent[1]};
  }
};

// ------------------------------------------------------------ reader process
[[noreturn]] void ReaderMain(Pipe p) {
  for (;;) {
    std::istringstream cmd(p.Recv());
    std::string op, dir;
    uint64_t n = 0;
    cmd >> op;
    if (op == "quit") _exit(0);
    cmd >> dir >> n;
    auto r = zv::shm::Reader::Attach(dir);
    if (!r.ok()) Die("attach: " + r.status().ToString());
    auto& reader = **r;
    p.Send("attached");
    uint64_t refreshes = 0, seen = 0;
    for (;;) {
      auto c = reader.Refresh();
      if (!c.ok()) Die("refresh: " + c.status().ToString());
      ++refreshes;
      seen = *c;
      if (seen >= n) break;
      // Poll every ~20 us rather than spin: a spinning core would compete with
      // the writer's tokenizer threads; adds at most tens of microseconds.
      const timespec nap{0, 20000};
      nanosleep(&nap, nullptr);
    }
    const int64_t t = NowNs();
    // Read the last row where it lies: a pooled, normalised vector.
    const float* row = reader.Row(n - 1);
    double sq = 0;
    for (uint32_t d = 0; d < reader.info().dim; ++d)
      sq += double(row[d]) * row[d];
    std::ostringstream o;
    o << t << " " << std::sqrt(sq) << " " << reader.Id(n - 1) << " "
      << refreshes;
    p.Send(o.str());
  }
}

// ------------------------------------------------------------ server process
class IndexServer final : public v1::ZeroVec::Service {
 public:
  grpc::Status Upsert(grpc::ServerContext* ctx, const v1::UpsertRequest* req,
                      v1::UpsertResponse* resp) override {
    const int64_t t0 = NowNs();
    std::lock_guard<std::mutex> lock(mu_);
    if (req->items_size() == 0)
      return {grpc::StatusCode::INVALID_ARGUMENT, "no items"};
    const int dim = req->items(0).vector_size();
    auto& idx = indexes_[req->collection()];
    if (!idx) idx = std::make_unique<faiss::IndexFlatIP>(dim);
    for (const v1::Item& it : req->items()) {
      if (it.vector_size() != dim)
        return {grpc::StatusCode::INVALID_ARGUMENT, "dim"};
      idx->add(1, it.vector().data());  // the copy into the index
      ids_[req->collection()].push_back(it.id());
    }
    resp->set_upserted(req->items_size());
    ctx->AddTrailingMetadata("x-handler-ns", std::to_string(NowNs() - t0));
    ctx->AddTrailingMetadata("x-index-rows", std::to_string(idx->ntotal));
    return grpc::Status::OK;
  }
  grpc::Status DropCollection(grpc::ServerContext*,
                              const v1::DropCollectionRequest* req,
                              v1::DropCollectionResponse*) override {
    std::lock_guard<std::mutex> lock(mu_);
    indexes_.erase(req->name());
    ids_.erase(req->name());
    return grpc::Status::OK;
  }

 private:
  std::mutex mu_;
  std::map<std::string, std::unique_ptr<faiss::IndexFlatIP>> indexes_;
  std::map<std::string, std::vector<std::string>> ids_;
};

[[noreturn]] void ServerMain(Pipe p) {
  IndexServer service;
  grpc::ServerBuilder b;
  int port = 0;
  b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  b.SetMaxReceiveMessageSize(1 << 30);
  b.SetMaxSendMessageSize(1 << 30);
  b.RegisterService(&service);
  auto server = b.BuildAndStart();
  if (!server || port == 0) Die("gRPC server did not start");
  p.Send(std::to_string(port));
  p.Recv();  // "quit"
  server->Shutdown();
  _exit(0);
}

// The command line, with its defaults.
struct IngestFlags {
  std::map<std::string, std::string> a;
  std::string bucket;
  uint64_t rows = 0;
  int reps = 0;
  fs::path base;
  std::vector<int> chunks;
  std::string device;
};

IngestFlags ParseFlags(int argc, char** argv) {
  IngestFlags f;
  auto& a = f.a;
  for (int i = 1; i + 1 < argc; i += 2) a[argv[i]] = argv[i + 1];
  for (const char* k : {"--model", "--texts", "--out"})
    if (!a.count(k)) Die(std::string("missing ") + k);
  f.bucket = a.count("--bucket") ? a["--bucket"] : "medium";
  f.rows = a.count("--rows") ? std::stoull(a["--rows"]) : 65536;
  f.reps = a.count("--reps") ? std::stoi(a["--reps"]) : 3;
  f.base = a.count("--dir") ? a["--dir"] : "/tmp/zv_ingest";
  f.chunks = {1024, 4096};
  if (a.count("--chunks")) {
    f.chunks.clear();
    std::stringstream ss(a["--chunks"]);
    for (std::string x; std::getline(ss, x, ',');)
      f.chunks.push_back(std::stoi(x));
  }
  f.device = a.count("--device") ? a["--device"] : "cuda";
  return f;
}

// `rows` texts of `bucket` from the texts file, cycled.
std::vector<std::string> ReadTexts(const std::string& path,
                                   const std::string& bucket, uint64_t rows) {
  std::vector<std::string> texts;
  std::ifstream in(path);
  std::vector<std::string> all;
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    json r = json::parse(line);
    if (r["bucket"] == bucket) all.push_back(r["text"]);
  }
  if (all.empty()) Die("no texts in bucket " + bucket);
  for (uint64_t i = 0; i < rows; ++i) texts.push_back(all[i % all.size()]);
  return texts;
}

// Warm-up: CUDA context, cuBLAS heuristics, first allocations.
void WarmUp(zv::embed::Embedder& emb,
            const std::vector<std::string_view>& views) {
  const int dim = emb.info().dim;
  std::vector<float> w(size_t(256) * dim);
  std::vector<float*> r;
  for (int i = 0; i < 256; ++i) r.push_back(&w[size_t(i) * dim]);
  CHECK_OK(emb.EmbedInto(std::span(views.data(), 256), r));
}

// What every measured ingest shares, and where its results go.
struct IngestContext {
  zv::embed::Embedder& emb;
  const std::vector<std::string_view>& views;
  uint64_t rows;
  int dim;
  json& out;
  std::map<std::string, std::vector<double>>& rate;
};

// ---- zero-copy: SegmentSink into a segment, until the reader process sees it.
void RunZeroCopy(IngestContext& c, Pipe& reader, const fs::path& base, int rep,
                 int chunk) {
  auto& emb = c.emb;
  const auto& views = c.views;
  const uint64_t rows = c.rows;
  const fs::path dir =
      base / ("zc_" + std::to_string(rep) + "_" + std::to_string(chunk));
  fs::remove_all(dir);
  zv::shm::SegmentOptions so;
  so.dim = c.dim;
  auto w_or = zv::shm::Writer::Create(dir, so);
  CHECK_OK(w_or.status());
  auto& w = **w_or;
  reader.Send("attach " + dir.string() + " " + std::to_string(rows));
  if (reader.Recv() != "attached") Die("reader");
  zv::embed::SegmentSink sink(emb, w);
  double reserve_ms = 0, embed_ms = 0, commit_ms = 0;
  const int64_t t0 = NowNs();
  for (uint64_t first = 0; first < rows; first += chunk) {
    const uint64_t n = std::min<uint64_t>(chunk, rows - first);
    int64_t s = NowNs();
    CHECK_OK(w.Reserve(n));
    int64_t e = NowNs();
    reserve_ms += (e - s) / 1e6;
    CHECK_OK(sink.Embed(std::span(views.data() + first, n), first));
    s = NowNs();
    embed_ms += (s - e) / 1e6;
    for (uint64_t i = 0; i < n; ++i) w.SetId(first + i, int64_t(first + i));
    CHECK_OK(w.Commit(first + n));
    commit_ms += (NowNs() - s) / 1e6;
  }
  const int64_t t_commit = NowNs();
  std::istringstream ans(reader.Recv());
  int64_t t_seen = 0;
  double norm = 0;
  int64_t last_id = -1;
  uint64_t refreshes = 0;
  ans >> t_seen >> norm >> last_id >> refreshes;
  if (std::fabs(norm - 1.0) > 1e-3 || last_id != int64_t(rows - 1))
    Die("reader saw a wrong last row");
  const double s = (t_seen - t0) / 1e9;
  json rec = {{"path", "zero-copy"},
              {"chunk", chunk},
              {"rep", rep},
              {"seconds", s},
              {"rows_per_s", rows / s},
              {"reserve_ms", reserve_ms},
              {"embed_ms", embed_ms},
              {"setid_commit_ms", commit_ms},
              {"writer_done_to_reader_seen_us", (t_seen - t_commit) / 1e3},
              {"reader_refreshes", refreshes},
              {"sink", emb.device_description()}};
  std::printf("%s\n", rec.dump().c_str());
  std::fflush(stdout);
  if (rep > 0) {
    c.out["runs"].push_back(rec);
    c.rate["zero-copy/" + std::to_string(chunk)].push_back(rows / s);
  }
  fs::remove_all(dir);
}

// ---- conventional: EmbedInto host memory, protobuf, Upsert over gRPC.
void RunConventional(IngestContext& c, v1::ZeroVec::Stub* stub, int rep,
                     int chunk) {
  auto& emb = c.emb;
  const auto& views = c.views;
  const uint64_t rows = c.rows;
  const int dim = c.dim;
  const std::string coll =
      "c" + std::to_string(rep) + "_" + std::to_string(chunk);
  std::vector<float> host(size_t(chunk) *
                          dim);  // ordinary memory: staged + copied
  std::vector<float*> hrows;
  for (int i = 0; i < chunk; ++i) hrows.push_back(&host[size_t(i) * dim]);
  double embed_ms = 0, build_ms = 0, rpc_ms = 0, handler_ms = 0;
  uint64_t bytes = 0, index_rows = 0;
  const int64_t t0 = NowNs();
  for (uint64_t first = 0; first < rows; first += chunk) {
    const uint64_t n = std::min<uint64_t>(chunk, rows - first);
    int64_t s = NowNs();
    CHECK_OK(emb.EmbedInto(std::span(views.data() + first, n),
                           std::span(hrows.data(), n)));
    int64_t e = NowNs();
    embed_ms += (e - s) / 1e6;
    v1::UpsertRequest req;
    req.set_collection(coll);
    req.mutable_items()->Reserve(n);
    for (uint64_t i = 0; i < n; ++i) {
      v1::Item* it = req.add_items();
      it->set_id(std::to_string(first + i));
      it->mutable_vector()->Add(host.data() + i * dim,
                                host.data() + (i + 1) * dim);
    }
    s = NowNs();
    build_ms += (s - e) / 1e6;
    bytes += req.ByteSizeLong();
    grpc::ClientContext ctx;
    v1::UpsertResponse resp;
    grpc::Status st = stub->Upsert(&ctx, req, &resp);
    if (!st.ok()) Die("Upsert: " + st.error_message());
    if (resp.upserted() != n) Die("Upsert count");
    rpc_ms += (NowNs() - s) / 1e6;
    for (const auto& [k, v] : ctx.GetServerTrailingMetadata()) {
      if (k == "x-handler-ns")
        handler_ms += std::stoll(std::string(v.data(), v.size())) / 1e6;
      if (k == "x-index-rows")
        index_rows = std::stoull(std::string(v.data(), v.size()));
    }
  }
  const double s = (NowNs() - t0) / 1e9;
  if (index_rows != rows)
    Die("index holds " + std::to_string(index_rows) + " rows");
  json rec = {{"path", "conventional-grpc"},
              {"chunk", chunk},
              {"rep", rep},
              {"seconds", s},
              {"rows_per_s", rows / s},
              {"embed_ms", embed_ms},
              {"build_request_ms", build_ms},
              {"rpc_ms", rpc_ms},
              {"server_handler_ms", handler_ms},
              {"request_bytes", bytes}};
  std::printf("%s\n", rec.dump().c_str());
  std::fflush(stdout);
  if (rep > 0) {
    c.out["runs"].push_back(rec);
    c.rate["conventional-grpc/" + std::to_string(chunk)].push_back(rows / s);
  }
  grpc::ClientContext ctx;
  v1::DropCollectionRequest dr;
  dr.set_name(coll);
  v1::DropCollectionResponse dresp;
  stub->DropCollection(&ctx, dr, &dresp);
}

// Medians, zero-copy / conventional ratios, printed and written to `path`.
void WriteSummary(json& out, std::map<std::string, std::vector<double>>& rate,
                  const std::vector<int>& chunks, const std::string& path) {
  for (auto& [k, v] : rate) out["median_rows_per_s"][k] = Median(v);
  for (int chunk : chunks) {
    const std::string c = std::to_string(chunk);
    out["ratio_zero_copy_over_conventional"][c] =
        Median(rate["zero-copy/" + c]) / Median(rate["conventional-grpc/" + c]);
  }
  std::printf("%s\n", out["median_rows_per_s"].dump().c_str());
  std::printf("ratio zero-copy / conventional: %s\n",
              out["ratio_zero_copy_over_conventional"].dump().c_str());
  std::ofstream(path) << out.dump(1);
}

}  // namespace

int main(int argc, char** argv) {
  IngestFlags f = ParseFlags(argc, argv);
  auto& a = f.a;

  // Children first: before CUDA or gRPC exist in this process.
  Channel rc, sc;
  const pid_t reader_pid = fork();
  if (reader_pid == 0) ReaderMain(rc.ChildSide());
  Pipe reader = rc.ParentSide();
  const pid_t server_pid = fork();
  if (server_pid == 0) ServerMain(sc.ChildSide());
  Pipe server = sc.ParentSide();
  const int port = std::stoi(server.Recv());

  std::vector<std::string> texts = ReadTexts(a["--texts"], f.bucket, f.rows);
  std::vector<std::string_view> views(texts.begin(), texts.end());

  zv::embed::EmbedderOptions opt;
  opt.model_dir = a["--model"];
  opt.device = f.device == "cpu" ? zv::embed::DevicePreference::kCpu
                                 : zv::embed::DevicePreference::kCuda;
  auto emb_or = zv::embed::Embedder::Create(opt);
  CHECK_OK(emb_or.status());
  auto& emb = **emb_or;
  const int dim = emb.info().dim;
  WarmUp(emb, views);

  grpc::ChannelArguments ca;
  ca.SetMaxReceiveMessageSize(1 << 30);
  ca.SetMaxSendMessageSize(1 << 30);
  auto channel =
      grpc::CreateCustomChannel("127.0.0.1:" + std::to_string(port),
                                grpc::InsecureChannelCredentials(), ca);
  auto stub = v1::ZeroVec::NewStub(channel);

  json out;
  out["model"] = a["--model"];
  out["dim"] = dim;
  out["bucket"] = f.bucket;
  out["rows"] = f.rows;
  out["grpc_version"] = grpc::Version();
  out["protobuf_version"] = GOOGLE_PROTOBUF_VERSION;
  fs::create_directories(f.base);
  std::map<std::string, std::vector<double>> rate;

  IngestContext ctx{emb, views, f.rows, dim, out, rate};
  for (int rep = 0; rep < f.reps + 1; ++rep) {  // rep 0 is a warm-up
    for (int chunk : f.chunks) {
      RunZeroCopy(ctx, reader, f.base, rep, chunk);
      RunConventional(ctx, stub.get(), rep, chunk);
    }
  }
  WriteSummary(out, rate, f.chunks, a["--out"]);
  reader.Send("quit");
  server.Send("quit");
  waitpid(reader_pid, nullptr, 0);
  waitpid(server_pid, nullptr, 0);
  return 0;
}
