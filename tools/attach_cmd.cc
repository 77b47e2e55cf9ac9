// zerovec attach: a co-located, read-only search of a collection a server
// writes.
#include <iostream>

#include "embed/embedder.h"
#include "index/collection.h"
#include "tools/cli_util.h"
#include "tools/commands.h"

namespace zv::tools {
namespace {

// Errors past flag parsing are not usage errors (exit 1, not 2).
Status RunError(const Status& s) {
  return s.code() == StatusCode::kInvalidArgument
             ? FailedPreconditionError(s.message())
             : s;
}

// --text embedded in this process with the resolved model, checked against
// the collection's dimension.
StatusOr<std::vector<float>> EmbedQueryText(const Flags& flags,
                                            embed::EmbedderOptions eo,
                                            uint32_t dim) {
  ZV_ASSIGN_OR_RETURN(const std::string model, ResolveModelDir(flags));
  if (model.empty())
    return FailedPreconditionError("--text needs a model (not --model none)");
  eo.model_dir = model;
  auto embedder = embed::Embedder::Create(eo);
  if (!embedder.ok())
    return RunError(
        embedder.status().WithContext("model " + eo.model_dir.string()));
  if (!flags.Has("quiet")) {
    std::cerr << "zerovec attach: model " << eo.model_dir.string()
              << ", device " << (*embedder)->device_description() << "\n";
  }
  if (static_cast<uint32_t>((*embedder)->info().dim) != dim) {
    return FailedPreconditionError(
        "model " + eo.model_dir.string() + " makes " +
        std::to_string((*embedder)->info().dim) +
        "-d vectors, collection has dim " + std::to_string(dim));
  }
  std::vector<float> query(dim);
  const std::string text = flags.Get("text");
  std::string_view view = text;
  float* row = query.data();
  if (Status s = (*embedder)->EmbedInto({&view, 1}, {&row, 1}); !s.ok())
    return RunError(s);
  return query;
}

// The query vector: none for lexical, a --vector-file, or --text embedded.
StatusOr<std::vector<float>> QueryVector(const Flags& flags,
                                         index::SearchMode mode,
                                         const embed::EmbedderOptions& device,
                                         uint32_t dim) {
  if (mode == index::SearchMode::kLexical) return std::vector<float>();
  std::vector<float> query;
  if (flags.Has("vector-file")) {
    auto values = ReadVectorFile(flags.Get("vector-file"));
    if (!values.ok()) return RunError(values.status());
    query = std::move(values).value();
  } else {
    ZV_ASSIGN_OR_RETURN(query, EmbedQueryText(flags, device, dim));
  }
  if (query.size() != dim) {
    return FailedPreconditionError("--vector-file: expected " +
                                   std::to_string(dim) + " values, got " +
                                   std::to_string(query.size()));
  }
  return query;
}

Status Attach(const Flags& flags) {
  const std::string data = flags.Get("data", kDefaultData);
  ZV_ASSIGN_OR_RETURN(const std::string name, flags.Require("collection"));
  ZV_ASSIGN_OR_RETURN(const int64_t k, flags.GetInt("k", 10, 1, index::kMaxK));
  if (flags.Has("text") == flags.Has("vector-file")) {
    return InvalidArgumentError("give exactly one of --text or --vector-file");
  }
  if (flags.Has("text") && flags.Get("text").empty()) {
    return InvalidArgumentError("--text: empty");
  }
  index::SearchOptions options;
  options.k = static_cast<int>(k);
  options.include_documents = true;
  if (flags.Has("namespace")) options.filter.ns = flags.Get("namespace");
  ZV_ASSIGN_OR_RETURN(options.mode,
                      ParseSearchMode(flags.Get("mode", "dense")));
  ZV_ASSIGN_OR_RETURN(options.fusion, ParseFusionFlags(flags));
  ZV_ASSIGN_OR_RETURN(options.recency, RecencyFromFlags(flags));
  const index::SearchMode mode = options.mode;
  if (mode != index::SearchMode::kDense) {
    if (!flags.Has("text")) {
      return InvalidArgumentError("--mode " + flags.Get("mode") +
                                  ": needs --text (a vector has no words)");
    }
    options.query_texts = {flags.Get("text")};
  }
  ZV_ASSIGN_OR_RETURN(const embed::EmbedderOptions device,
                      embed::ParseDevice(flags.Get("device", "auto")));

  auto attached = index::AttachedCollection::Attach(data, name);
  if (!attached.ok())
    return RunError(attached.status().WithContext("attach " + name));
  ZV_ASSIGN_OR_RETURN(
      const std::vector<float> query,
      QueryVector(flags, mode, device, (*attached)->Describe().dim));
  auto results = (*attached)->Search(query, options);
  if (!results.ok()) return RunError(results.status());
  std::vector<OutputHit> hits;
  for (const auto& h : results->at(0))
    hits.push_back({h.id,
                    h.score,
                    h.record.ns,
                    h.record.text,
                    {h.record.metadata.begin(), h.record.metadata.end()},
                    mode != index::SearchMode::kDense,
                    h.dense_rank,
                    h.lexical_rank});
  PrintHits(hits, flags.Has("json"), std::cout);
  return OkStatus();
}

}  // namespace

int RunAttach(const std::vector<std::string>& args) {
  auto flags = Flags::Parse(
      args,
      {"data", "collection", "text", "vector-file", "k", "namespace", "model",
       "device", "recency-half-life-ms", "recency-weight", "mode", "rrf-k",
       "dense-weight", "lexical-weight"},
      {"json", "quiet"});
  if (!flags.ok()) return Fail("attach", flags.status(), true);
  Status s = Attach(*flags);
  if (!s.ok()) return Fail("attach", s, IsUsageError(s));
  return 0;
}

}  // namespace zv::tools
