// zerovec build: bulk-embeds a corpus into a collection, resumably.
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <memory>
#include <string_view>
#include <unordered_set>

#include "embed/embedder.h"
#include "index/collection.h"
#include "tools/cli_util.h"
#include "tools/commands.h"
#include "tools/corpus_reader.h"

namespace zv::tools {
namespace {

struct CorpusSummary {
  uint64_t records = 0;
  size_t vector_dim = 0;        // of the first precomputed "vector", 0: none
  int64_t first_text_only = 0;  // line of the first record without a vector
};

// First pass: checks every line and counts records, so a bad line fails the
// build before anything is written and the progress bar knows its total.
// Precomputed vectors must all have one size.
StatusOr<CorpusSummary> CountRecords(const std::filesystem::path& input,
                                     CorpusFormat format) {
  ZV_ASSIGN_OR_RETURN(auto reader, CorpusReader::Open(input, format));
  CorpusSummary sum;
  CorpusRecord record;
  while (true) {
    ZV_ASSIGN_OR_RETURN(bool more, reader->Next(&record));
    if (!more) return sum;
    ++sum.records;
    if (record.vector.empty()) {
      if (sum.first_text_only == 0) sum.first_text_only = reader->line_number();
    } else if (sum.vector_dim == 0) {
      sum.vector_dim = record.vector.size();
    } else if (record.vector.size() != sum.vector_dim) {
      return InvalidArgumentError(
          input.filename().string() + ":" +
          std::to_string(reader->line_number()) + ": \"vector\" has " +
          std::to_string(record.vector.size()) + " values, line(s) before " +
          std::to_string(sum.vector_dim));
    }
  }
}

struct BuildStats {
  uint64_t stored = 0;
  uint64_t skipped = 0;
};

// A batch holds either records to embed (vectors empty) or records with
// precomputed vectors (row-major in `vectors`), never both.
Status StoreBatch(index::Collection& collection, embed::Embedder* embedder,
                  std::vector<index::Record>& batch,
                  std::vector<float>& vectors, BuildStats* stats) {
  if (batch.empty()) return OkStatus();
  if (!vectors.empty()) {
    ZV_RETURN_IF_ERROR(collection.Upsert(batch, vectors));
    stats->stored += batch.size();
    batch.clear();
    vectors.clear();
    return OkStatus();
  }
  std::vector<std::string_view> texts;
  texts.reserve(batch.size());
  for (const auto& r : batch) texts.push_back(r.text);
  // The embedder writes straight into the collection's segment rows.
  ZV_RETURN_IF_ERROR(
      collection.UpsertInPlace(batch, [&](std::span<float* const> rows) {
        return embedder->EmbedInto(texts, rows);
      }));
  stats->stored += batch.size();
  batch.clear();
  return OkStatus();
}

Status Build(const Flags& flags, BuildStats* stats,
             std::string* collection_name) {
  ZV_ASSIGN_OR_RETURN(*collection_name, flags.Require("collection"));
  ZV_ASSIGN_OR_RETURN(const std::string input, flags.Require("input"));
  const std::string data = flags.Get("data", kDefaultData);
  const std::string model = flags.Get("model", kDefaultModel);
  ZV_ASSIGN_OR_RETURN(const std::string descriptor,
                      IndexDescriptor(flags.Get("index", "flat")));
  ZV_ASSIGN_OR_RETURN(const int64_t batch_size,
                      flags.GetInt("batch", 64, 1, 4096));
  const std::string format_flag = flags.Get("format", "auto");
  CorpusFormat format;
  if (format_flag == "auto") {
    format = GuessCorpusFormat(input);
  } else if (format_flag == "jsonl") {
    format = CorpusFormat::kJsonl;
  } else if (format_flag == "text") {
    format = CorpusFormat::kText;
  } else {
    return InvalidArgumentError(
        "--format: expected auto, jsonl or text, got \"" + format_flag + "\"");
  }
  if (Status s = index::ValidateCollectionName(*collection_name); !s.ok()) {
    return InvalidArgumentError("--collection: " + s.message());
  }

  // From here on errors are not usage errors.
  auto fail = [](const Status& s) {
    return s.code() == StatusCode::kInvalidArgument
               ? FailedPreconditionError(s.message())
               : s;
  };
  auto summary = CountRecords(input, format);
  if (!summary.ok()) return fail(summary.status());
  const uint64_t total = summary->records;

  // --model none: every line must carry a precomputed "vector".
  std::unique_ptr<embed::Embedder> embedder;
  uint32_t dim = static_cast<uint32_t>(summary->vector_dim);
  if (model == "none") {
    if (summary->first_text_only != 0) {
      return FailedPreconditionError(
          input + ":" + std::to_string(summary->first_text_only) +
          ": no \"vector\" (needed with --model none)");
    }
  } else {
    embed::EmbedderOptions eo;
    eo.model_dir = model;
    auto created = embed::Embedder::Create(eo);
    if (!created.ok())
      return fail(created.status().WithContext("model " + model));
    embedder = std::move(created).value();
    const uint32_t model_dim = embedder->info().dim;
    if (dim != 0 && dim != model_dim) {
      return FailedPreconditionError(
          input + ": \"vector\" has " + std::to_string(dim) +
          " values but model " + model + " makes " + std::to_string(model_dim));
    }
    dim = model_dim;
  }

  auto db = index::Database::Open(data);
  if (!db.ok()) return fail(db.status().WithContext("data " + data));
  std::shared_ptr<index::Collection> collection;
  if (auto existing = (*db)->GetCollection(*collection_name); existing.ok()) {
    collection = *existing;
    if (dim != 0 && collection->Describe().dim != dim) {
      return FailedPreconditionError(
          "collection " + *collection_name + " has dim " +
          std::to_string(collection->Describe().dim) + " but " +
          (embedder ? "model " + model + " makes " : "the vectors have ") +
          std::to_string(dim));
    }
  } else if (dim == 0) {
    return FailedPreconditionError(input + ": no records");
  } else {
    index::CollectionOptions options;
    options.dim = dim;
    options.index.descriptor = descriptor;
    auto created = (*db)->CreateCollection(*collection_name, options);
    if (!created.ok()) return fail(created.status());
    collection = *created;
  }

  auto reader = CorpusReader::Open(input, format);
  if (!reader.ok()) return fail(reader.status());
  Progress progress("build " + *collection_name, total, isatty(STDERR_FILENO));
  std::vector<index::Record> batch;
  std::vector<float> batch_vectors;  // with precomputed vectors, row-major
  std::unordered_set<std::string> batch_ids;
  CorpusRecord record;
  uint64_t done = 0;
  while (true) {
    auto more = (*reader)->Next(&record);
    if (!more.ok()) return fail(more.status());
    if (!*more) break;
    ++done;
    // Resumable: ids already stored (an earlier, interrupted run) are skipped;
    // the first line with an id wins.
    auto stored = collection->Contains(record.id);
    if (!stored.ok()) return fail(stored.status());
    if (*stored || batch_ids.count(record.id)) {
      ++stats->skipped;
    } else {
      // Batches are homogeneous: flush when the kind changes.
      const bool has_vector = !record.vector.empty();
      if (!batch.empty() && has_vector == batch_vectors.empty()) {
        if (Status st = StoreBatch(*collection, embedder.get(), batch,
                                   batch_vectors, stats);
            !st.ok()) {
          return fail(st);
        }
        batch_ids.clear();
      }
      batch_vectors.insert(batch_vectors.end(), record.vector.begin(),
                           record.vector.end());
      index::Record r;
      r.id = std::move(record.id);
      r.text = std::move(record.text);
      r.ns = std::move(record.ns);
      r.metadata = std::move(record.metadata);
      r.timestamp_ms = record.timestamp_ms;
      batch_ids.insert(r.id);
      batch.push_back(std::move(r));
    }
    if (batch.size() >= static_cast<size_t>(batch_size)) {
      if (Status st = StoreBatch(*collection, embedder.get(), batch,
                                 batch_vectors, stats);
          !st.ok()) {
        return fail(st);
      }
      batch_ids.clear();
    }
    // Count a line once its row is stored (or it was skipped with nothing
    // pending).
    if (batch.empty()) progress.Update(done);
  }
  if (Status st =
          StoreBatch(*collection, embedder.get(), batch, batch_vectors, stats);
      !st.ok())
    return fail(st);
  progress.Finish(done);
  return OkStatus();
}

}  // namespace

StatusOr<std::string> IndexDescriptor(const std::string& flag) {
  if (flag == "flat") return std::string("Flat");
  if (flag == "hnsw") return std::string("HNSW32");
  if (flag == "ivfpq") return std::string("IVF1024,PQ48");
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
      {"data", "collection", "input", "model", "index", "batch", "format"}, {});
  if (!flags.ok()) return Fail("build", flags.status(), true);
  BuildStats stats;
  std::string name;
  const auto start = std::chrono::steady_clock::now();
  Status s = Build(*flags, &stats, &name);
  if (!s.ok()) return Fail("build", s, IsUsageError(s));
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  char line[256];
  std::snprintf(line, sizeof(line),
                "build: stored %llu rows in collection %s (skipped %llu "
                "already stored) in "
                "%.2f s\n",
                static_cast<unsigned long long>(stats.stored), name.c_str(),
                static_cast<unsigned long long>(stats.skipped), secs);
  std::cout << line;
  return 0;
}

}  // namespace zv::tools
