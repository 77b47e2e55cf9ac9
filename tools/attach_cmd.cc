// zerovec attach: a co-located, read-only search of a collection a server
// writes.
#include <iostream>

#include "embed/embedder.h"
#include "index/collection.h"
#include "tools/cli_util.h"
#include "tools/commands.h"

namespace zv::tools {
namespace {

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
  ZV_ASSIGN_OR_RETURN(const index::SearchMode mode,
                      ParseSearchMode(flags.Get("mode", "dense")));
  ZV_ASSIGN_OR_RETURN(const index::FusionOptions fusion,
                      ParseFusionFlags(flags));
  if (mode != index::SearchMode::kDense && !flags.Has("text")) {
    return InvalidArgumentError("--mode " + flags.Get("mode") +
                                ": needs --text (a vector has no words)");
  }
  ZV_ASSIGN_OR_RETURN(const embed::EmbedderOptions device,
                      embed::ParseDevice(flags.Get("device", "auto")));
  auto fail = [](const Status& s) {
    return s.code() == StatusCode::kInvalidArgument
               ? FailedPreconditionError(s.message())
               : s;
  };

  auto attached = index::AttachedCollection::Attach(data, name);
  if (!attached.ok())
    return fail(attached.status().WithContext("attach " + name));
  const uint32_t dim = (*attached)->Describe().dim;

  std::vector<float> query;
  if (mode == index::SearchMode::kLexical) {
    // Words only: no model needed.
  } else if (flags.Has("vector-file")) {
    auto values = ReadVectorFile(flags.Get("vector-file"));
    if (!values.ok()) return fail(values.status());
    query = std::move(values).value();
  } else {
    embed::EmbedderOptions eo = device;
    ZV_ASSIGN_OR_RETURN(const std::string model, ResolveModelDir(flags));
    if (model.empty())
      return FailedPreconditionError("--text needs a model (not --model none)");
    eo.model_dir = model;
    auto embedder = embed::Embedder::Create(eo);
    if (!embedder.ok())
      return fail(
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
    query.resize(dim);
    const std::string text = flags.Get("text");
    std::string_view view = text;
    float* row = query.data();
    if (Status s = (*embedder)->EmbedInto({&view, 1}, {&row, 1}); !s.ok())
      return fail(s);
  }
  if (mode != index::SearchMode::kLexical && query.size() != dim) {
    return FailedPreconditionError("--vector-file: expected " +
                                   std::to_string(dim) + " values, got " +
                                   std::to_string(query.size()));
  }

  index::SearchOptions options;
  options.k = static_cast<int>(k);
  options.include_documents = true;
  if (flags.Has("namespace")) options.filter.ns = flags.Get("namespace");
  auto recency = RecencyFromFlags(flags);
  if (!recency.ok()) return recency.status();  // a usage error
  options.recency = *recency;
  options.mode = mode;
  options.fusion = fusion;
  if (mode != index::SearchMode::kDense) {
    options.query_texts = {flags.Get("text")};
  }
  auto results = (*attached)->Search(query, options);
  if (!results.ok()) return fail(results.status());
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
