// zerovec build: bulk-loads a corpus into a collection as a pipeline, in one
// pass over the input, resumably.
//
//   reader thread:  parse (simdjson) / map (.npy, .fvecs) -> skip stored ids ->
//                   reserve segment rows -> copy vectors or submit the texts
//                   to the embedder (which tokenizes on several threads and
//                   encodes on the GPU, two streams) -> bounded queue
//   this thread:    wait for the rows -> commit in order (RocksDB WriteBatch,
//                   publish, index add) -> progress
//
// Stages overlap; the queue bounds memory (--inflight chunks, default 16). A
// bad line stops the build: what came before it is committed, nothing from it
// on. The pipeline itself: build_pipeline.cc; here the flags, the model,
// dimension and collection choices, and the closing report.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <thread>

#include "embed/embedder.h"
#include "index/collection.h"
#include "tools/build_pipeline.h"
#include "tools/cli_util.h"
#include "tools/commands.h"
#include "tools/corpus_reader.h"
#include "tools/vector_file.h"

namespace zv::tools {
namespace {
using Clock = std::chrono::steady_clock;

// Chunks queued between the reader and the committer. Two are being embedded
// (one per GPU bulk lane) while others are staged (each on its own thread)
// and committed.
// By Little's law the rows a second are the rows in flight over a chunk's time
// from reading to commit; RocksDB and tokenizing make that time long, so
// enough chunks must be in flight (16 x 16384 rows on a GPU).
constexpr int64_t kDefaultChunksInFlight = 16;

double Seconds(Clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

enum class InputKind { kJsonl, kText, kNpy, kFvecs };

StatusOr<InputKind> InputKindOf(const std::string& input,
                                const std::string& flag) {
  if (flag == "auto") {
    const std::string ext = std::filesystem::path(input).extension().string();
    if (ext == ".npy") return InputKind::kNpy;
    if (ext == ".fvecs") return InputKind::kFvecs;
    return GuessCorpusFormat(input) == CorpusFormat::kJsonl ? InputKind::kJsonl
                                                            : InputKind::kText;
  }
  if (flag == "jsonl") return InputKind::kJsonl;
  if (flag == "text") return InputKind::kText;
  if (flag == "npy") return InputKind::kNpy;
  if (flag == "fvecs") return InputKind::kFvecs;
  return InvalidArgumentError(
      "--format: expected auto, jsonl, text, npy or fvecs, got \"" + flag +
      "\"");
}

// What the flags of `zerovec build` ask for, checked (usage errors).
struct BuildPlan {
  std::string input;
  std::string data;
  std::string descriptor;
  int64_t batch = 0;
  int64_t in_flight = kDefaultChunksInFlight;
  InputKind kind = InputKind::kJsonl;
  std::vector<embed::EmbedderOptions> devices;  // one encoder each
  bool vector_file = false;
  std::string model = "none";
  bool chunk_long = false;
  bool lexical = false;   // --lexical: a lexical index (fixed at creation)
  bool one_graph = true;  // --hnsw-seal one-graph (default) or pieces
};

StatusOr<BuildPlan> PlanBuild(const Flags& flags,
                              std::string* collection_name) {
  BuildPlan p;
  ZV_ASSIGN_OR_RETURN(*collection_name, flags.Require("collection"));
  ZV_ASSIGN_OR_RETURN(p.input, flags.Require("input"));
  if (flags.Has("group")) {
    ZV_RETURN_IF_ERROR(CheckGroupFlag(flags.Get("group")));
  }
  p.data = flags.Get("data", kDefaultData);
  ZV_ASSIGN_OR_RETURN(p.descriptor,
                      IndexDescriptor(flags.Get("index", "flat")));
  ZV_ASSIGN_OR_RETURN(p.batch, flags.GetInt("batch", 0, 0, 1 << 20));
  ZV_ASSIGN_OR_RETURN(p.in_flight,
                      flags.GetInt("inflight", kDefaultChunksInFlight, 1, 256));
  ZV_ASSIGN_OR_RETURN(p.kind,
                      InputKindOf(p.input, flags.Get("format", "auto")));
  ZV_ASSIGN_OR_RETURN(const DeviceChoice choice, ParseDeviceFlags(flags));
  p.devices = choice.devices;
  ZV_ASSIGN_OR_RETURN(const int64_t threads,
                      flags.GetInt("threads", 0, 0, 4096));
  for (auto& d : p.devices) d.cpu_threads = static_cast<int>(threads);
  p.vector_file = p.kind == InputKind::kNpy || p.kind == InputKind::kFvecs;
  if (flags.Has("ids") && !p.vector_file) {
    return InvalidArgumentError("--ids: only with .npy or .fvecs input");
  }
  if (Status s = index::ValidateCollectionName(*collection_name); !s.ok()) {
    return InvalidArgumentError("--collection: " + s.message());
  }
  // Vector files need no model unless one is named (then its dim must match,
  // so the collection can be searched by text).
  if (!p.vector_file || flags.Has("model")) {
    ZV_ASSIGN_OR_RETURN(p.model, ResolveModelDir(flags));
    if (p.model.empty()) p.model = "none";
  }
  const std::string seal = flags.Get("hnsw-seal", "one-graph");
  if (seal != "one-graph" && seal != "pieces") {
    return InvalidArgumentError(
        "--hnsw-seal: expected one-graph or pieces, got \"" + seal + "\"");
  }
  p.one_graph = seal == "one-graph";
  p.chunk_long = flags.Has("chunk-long-texts");
  p.lexical = flags.Has("lexical");
  if (p.chunk_long && (p.vector_file || p.model == "none")) {
    return InvalidArgumentError(
        "--chunk-long-texts: only for texts the model embeds (not with "
        "--model none or vector files)");
  }
  return p;
}

// Past the flags, errors are not usage errors: INVALID_ARGUMENT becomes
// FAILED_PRECONDITION (exit code 1, not 2).
Status NotUsage(const Status& s) {
  return s.code() == StatusCode::kInvalidArgument
             ? FailedPreconditionError(s.message())
             : s;
}

StatusOr<std::unique_ptr<Source>> OpenSource(const BuildPlan& p,
                                             const Flags& flags) {
  const std::string name = std::filesystem::path(p.input).filename().string();
  if (p.vector_file) {
    auto file = VectorFile::Open(p.input, flags.Get("ids"));
    if (!file.ok()) return NotUsage(file.status());
    return std::unique_ptr<Source>(
        std::make_unique<VectorFileSource>(std::move(file).value(), name));
  }
  auto reader = CorpusReader::Open(p.input, p.kind == InputKind::kJsonl
                                                ? CorpusFormat::kJsonl
                                                : CorpusFormat::kText);
  if (!reader.ok()) return NotUsage(reader.status());
  return std::unique_ptr<Source>(
      std::make_unique<CorpusSource>(std::move(reader).value(), name));
}

// The collection's dimension: the model's, which the input's vectors (a
// vector file's, or the first record's) must match; without a model, theirs.
StatusOr<uint32_t> ChooseDim(const BuildPlan& p, const Source& source,
                             const CorpusRecord& first, bool more,
                             const embed::Embedder* embedder) {
  uint32_t dim = 0;
  if (source.vectors()) {
    dim = source.vectors()->dim();
  } else if (more && !first.vector.empty()) {
    dim = static_cast<uint32_t>(first.vector.size());
  }
  if (embedder) {
    const uint32_t model_dim = embedder->info().dim;
    if (dim != 0 && dim != model_dim) {
      return FailedPreconditionError(p.input + ": the vectors have " +
                                     std::to_string(dim) +
                                     " values but model " + p.model +
                                     " makes " + std::to_string(model_dim));
    }
    return model_dim;
  }
  if (more && dim == 0) {
    return FailedPreconditionError(
        source.where() + ": no \"vector\" (needed with --model none)");
  }
  return dim;
}

// The named collection: the existing one (its dim must be `dim`), else a new
// one when there is something to store.
StatusOr<std::shared_ptr<index::Collection>> OpenOrCreateCollection(
    index::Database& db, const std::string& name, const BuildPlan& p,
    uint32_t dim, bool more, const embed::Embedder* embedder) {
  if (auto existing = db.GetCollection(name); existing.ok()) {
    if (p.lexical && !(*existing)->Describe().lexical) {
      return FailedPreconditionError(
          "--lexical: collection " + name +
          " was created without a lexical index (fixed at creation)");
    }
    const uint32_t have = (*existing)->Describe().dim;
    if (have != dim) {
      return FailedPreconditionError(
          "collection " + name + " has dim " + std::to_string(have) + " but " +
          (embedder ? "model " + p.model + " makes " : "the vectors have ") +
          std::to_string(dim));
    }
    return *existing;
  }
  if (!more) return FailedPreconditionError(p.input + ": no records");
  index::CollectionOptions options;
  options.dim = dim;
  options.index.descriptor = p.descriptor;
  options.lexical = p.lexical;
  auto created = db.CreateCollection(name, options);
  if (!created.ok()) return NotUsage(created.status());
  return *created;
}

// Streams the source after `first` into the collection through the pipeline;
// what was committed is durable on return, error or not.
Status Ingest(const BuildPlan& p, Source& source, index::Collection& collection,
              embed::Embedder* embedder, uint32_t dim, CorpusRecord first,
              std::optional<uint64_t> first_row, BuildStats* stats) {
  // Rows a chunk: large on a GPU (each chunk is split into token-budget
  // batches there), smaller on the CPU so progress moves.
  const size_t chunk_rows = p.batch > 0 ? static_cast<size_t>(p.batch)
                            : (embedder && embedder->on_cuda()) || !embedder
                                ? 16384
                                : 1024;
  const bool resume = collection.Describe().rows > 0;
  Progress progress("build " + collection.name(), isatty(STDERR_FILENO));
  // Sealed into one graph at the end: build nothing meanwhile (pieces built
  // during the load would all be thrown away by the seal).
  if (p.one_graph) collection.DeferIndexing();
  auto appender = collection.StartBulkAppend();
  if (!appender.ok()) return NotUsage(appender.status());
  // Chunks of a long text share about 1/8 of the window, so a passage cut at
  // one chunk's end is whole in the next.
  const int split_overlap = p.chunk_long ? stats->window / 8 : -1;
  PipelineOptions options;
  options.dim = dim;
  options.chunk_rows = chunk_rows;
  options.max_in_flight = static_cast<size_t>(p.in_flight);
  options.resume = resume;
  options.split_overlap = split_overlap;
  Status s = RunPipeline(source, collection, **appender, embedder, options,
                         progress, stats, std::move(first), first_row);
  // Durable before we say so (also after an error: what was committed stays).
  Status finished = (*appender)->Finish();
  appender->reset();
  if (embedder) stats->lanes = embedder->bulk_stats();
  if (!s.ok()) return NotUsage(s);
  if (!finished.ok()) return NotUsage(finished);
  progress.Finish(stats->stored + stats->skipped);
  return OkStatus();
}

// The HNSW index is built now, on every core, so `serve` starts with it
// rather than an exact tail. By default as one graph over every row, built
// once here (the load deferred it): a bulk-loaded collection is mostly
// searched, and one graph answers several times faster than pieces at the
// same recall (bench/RESULTS.md, issue 21). With --hnsw-seal pieces the
// pieces were built in the background during the load; the tail joins them.
Status FinishHnsw(index::Collection& collection, bool one_graph) {
  if (collection.Describe().index_descriptor.rfind("HNSW", 0) != 0) {
    return OkStatus();
  }
  const auto t0 = std::chrono::steady_clock::now();
  const unsigned cores = std::thread::hardware_concurrency();
  if (Status idx =
          collection.FinishIndexing(cores > 0 ? int(cores) : 1, one_graph);
      !idx.ok())
    return NotUsage(idx);
  char line[96];
  std::snprintf(
      line, sizeof(line), "build: HNSW %s in %.2f s\n",
      one_graph ? "sealed into one graph" : "pieces built",
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
          .count());
  std::cerr << line;
  return OkStatus();
}

Status Build(const Flags& flags, BuildStats* stats,
             std::string* collection_name) {
  ZV_ASSIGN_OR_RETURN(BuildPlan p, PlanBuild(flags, collection_name));
  ZV_ASSIGN_OR_RETURN(std::unique_ptr<Source> source, OpenSource(p, flags));
  CorpusRecord first;
  std::optional<uint64_t> first_row;
  auto more = source->Next(&first, &first_row);
  if (!more.ok()) return NotUsage(more.status());

  std::unique_ptr<embed::Embedder> embedder;
  if (p.model != "none") {
    for (auto& d : p.devices) d.model_dir = p.model;
    auto created = embed::Embedder::CreateMulti(p.devices);
    if (!created.ok())
      return NotUsage(created.status().WithContext("model " + p.model));
    embedder = std::move(created).value();
  }
  ZV_ASSIGN_OR_RETURN(const uint32_t dim,
                      ChooseDim(p, *source, first, *more, embedder.get()));

  index::DatabaseOptions db_options;
  if (flags.Has("group")) db_options.group = flags.Get("group");
  auto db = index::Database::Open(p.data, db_options);
  if (!db.ok()) {
    return NotUsage(DataDirOpenError(
        p.data, db.status(),
        "add to it through that server (the Upsert RPC), stop it first, or "
        "build into another --data folder"));
  }
  ZV_ASSIGN_OR_RETURN(std::shared_ptr<index::Collection> collection,
                      OpenOrCreateCollection(**db, *collection_name, p, dim,
                                             *more, embedder.get()));
  if (embedder) {
    stats->window = embedder->info().max_length;
    stats->device = embedder->device_description();
    std::cerr << "build: model " << p.model << ", device " << stats->device
              << "\n";
  }
  if (!*more) return OkStatus();
  ZV_RETURN_IF_ERROR(Ingest(p, *source, *collection, embedder.get(), dim,
                            std::move(first), first_row, stats));
  return FinishHnsw(*collection, p.one_graph);
}

}  // namespace

StatusOr<std::string> IndexDescriptor(const std::string& flag) {
  if (flag == "flat") return std::string("Flat");
  if (flag == "hnsw") return std::string("HNSW32");
  // PQ32: m must divide the dimension; 32 divides the bundled model's 256 and
  // the common 384, 768 and 1024.
  if (flag == "ivfpq") return std::string("IVF1024,PQ32");
  if (!flag.empty() && std::isupper(static_cast<unsigned char>(flag[0])))
    return flag;
  return InvalidArgumentError(
      "--index: expected flat, hnsw, ivfpq or a FAISS descriptor, got \"" +
      flag + "\"");
}

int Fail(const std::string& command, const Status& s, bool usage) {
  std::cerr << "zerovec " << command << ": " << s.message() << "\n";
  return usage ? 2 : 1;
}

int RunBuild(const std::vector<std::string>& args) {
  auto flags = Flags::Parse(
      args,
      {"data", "collection", "input", "model", "index", "batch", "format",
       "device", "devices", "ids", "inflight", "group", "threads", "hnsw-seal"},
      {"chunk-long-texts", "lexical"});
  if (!flags.ok()) return Fail("build", flags.status(), true);
  BuildStats stats;
  std::string name;
  const auto start = Clock::now();
  Status s = Build(*flags, &stats, &name);
  if (!s.ok()) return Fail("build", s, IsUsageError(s));
  const double secs = Seconds(Clock::now() - start);
  char line[512];
  std::snprintf(line, sizeof(line),
                "build: stored %llu rows in collection %s (skipped %llu "
                "already stored) in %.2f s (%.0f rows/s)\n",
                static_cast<unsigned long long>(stats.stored), name.c_str(),
                static_cast<unsigned long long>(stats.skipped), secs,
                secs > 0 ? stats.stored / secs : 0.0);
  std::cout << line;
  const StageTimes& t = stats.times;
  std::snprintf(line, sizeof(line),
                "build: stage seconds: read+parse %.2f, resume checks %.2f, "
                "reserve rows %.2f, reader blocked %.2f | chunk tasks "
                "(vector copy, row checks, RocksDB; parallel, thread-s) %.2f | "
                "committer: wait for rows %.2f, publish+index %.2f\n",
                t.read, t.resume, t.fill, t.queue_full, t.stage, t.embed_wait,
                t.commit);
  std::cout << line;
  if (stats.lanes.texts > 0) {
    // Busy lanes (tokenize + encode near lanes x build time) mean the
    // embedder was the limit; idle ones, what feeds or follows it.
    const embed::LaneStats& l = stats.lanes;
    std::snprintf(line, sizeof(line),
                  "build: embedder %d bulk lane(s), %llu texts: tokenize "
                  "%.2f s, encode %.2f s (wall, summed over lanes)\n",
                  l.lanes, static_cast<unsigned long long>(l.texts),
                  l.tokenize_seconds, l.encode_seconds);
    std::cout << line;
  }
  if (stats.embedded > 0) {
    // Silent truncation loses the end of long documents: say so, and how
    // to keep them.
    std::snprintf(line, sizeof(line),
                  "build: truncated %llu of %llu texts to the model's window "
                  "(%d tokens)%s\n",
                  static_cast<unsigned long long>(stats.truncated),
                  static_cast<unsigned long long>(stats.embedded), stats.window,
                  stats.truncated > 0 && stats.split_texts == 0
                      ? "; --chunk-long-texts stores long texts as "
                        "overlapping chunks"
                      : "");
    std::cout << line;
  }
  if (stats.split_texts > 0) {
    std::snprintf(
        line, sizeof(line),
        "build: --chunk-long-texts: split %llu long text(s) into %llu "
        "rows (ids ID#0, ID#1, ..., metadata source_id and chunk)\n",
        static_cast<unsigned long long>(stats.split_texts),
        static_cast<unsigned long long>(stats.chunk_rows));
    std::cout << line;
  }
  if (!stats.device.empty())
    std::cout << "build: device " << stats.device << "\n";
  return 0;
}

}  // namespace zv::tools
