// zerovec._attach: the pybind11 extension behind zerovec.attach() (see
// python/zerovec/attach.py, which wraps it). Thin: it translates numpy arrays
// and Python values to the C++ AttachedCollection and Embedder, releases the
// GIL around every call that searches, refreshes or embeds, and turns a
// zv::Status into the matching zerovec.errors exception.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "embed/embedder.h"
#include "index/collection.h"

namespace py = pybind11;

namespace zv::python {
namespace {

// Carries a failed Status to the translator registered in the module.
struct StatusError {
  Status status;
};

void ThrowIfError(const Status& s) {
  if (!s.ok()) throw StatusError{s};
}

template <typename T>
T ValueOrThrow(StatusOr<T> v) {
  if (!v.ok()) throw StatusError{v.status()};
  return std::move(v).value();
}

// Runs `fn` with the GIL released, so other Python threads run meanwhile.
template <typename Fn>
auto WithoutGil(Fn&& fn) {
  py::gil_scoped_release release;
  return fn();
}

// A read-only numpy view of rows [first, first + count) of a block: strided
// (row_stride floats apart), only the dim meaningful columns, and owning a
// reference to the segment mapping so the memory outlives any Python object.
py::array RowView(const index::AttachedRows& rows, const shm::RowBlock& block,
                  py::object owner) {
  const std::vector<py::ssize_t> shape = {static_cast<py::ssize_t>(block.count),
                                          static_cast<py::ssize_t>(rows.dim)};
  const std::vector<py::ssize_t> strides = {
      static_cast<py::ssize_t>(rows.row_stride * sizeof(float)),
      static_cast<py::ssize_t>(sizeof(float))};
  py::array view(py::dtype::of<float>(), shape, strides, block.rows, owner);
  view.attr("setflags")(py::arg("write") = false);
  return view;
}

py::array IdHashView(const shm::RowBlock& block, py::object owner) {
  py::array view(py::dtype::of<int64_t>(),
                 {static_cast<py::ssize_t>(block.count)}, {}, block.ids, owner);
  view.attr("setflags")(py::arg("write") = false);
  return view;
}

// The block's tombstone bits as read-only bytes (bit j of byte i is row
// first_row + 8i + j: np.unpackbits(view, bitorder="little")), live: a delete
// the writer makes shows without a copy or a refresh.
py::array TombstoneBitsView(const shm::RowBlock& block, py::object owner) {
  py::array view(py::dtype::of<uint8_t>(),
                 {static_cast<py::ssize_t>((block.count + 7) / 8)}, {},
                 reinterpret_cast<const uint8_t*>(block.tombstones), owner);
  view.attr("setflags")(py::arg("write") = false);
  return view;
}

class Attached {
 public:
  Attached(const std::string& data_dir, const std::string& name) {
    collection_ = ValueOrThrow(WithoutGil(
        [&] { return index::AttachedCollection::Attach(data_dir, name); }));
  }

  void Refresh() {
    ThrowIfError(WithoutGil([&] { return collection_->Refresh(); }));
  }

  py::dict Describe() const {
    const index::CollectionInfo info = collection_->Describe();
    py::dict d;
    d["name"] = info.name;
    d["dim"] = info.dim;
    d["metric"] = info.metric == shm::Metric::kL2 ? "l2" : "ip";
    d["index"] = info.index_descriptor;
    d["rows"] = info.rows;
    d["live_rows"] = info.live_rows;
    d["tombstones"] = info.tombstones;
    d["generation"] = info.generation;
    d["segment_dir"] = info.segment_dir.string();
    d["lexical"] = info.lexical;
    d["lexical_documents"] = info.lexical_documents;
    return d;
  }

  // queries: (nq, dim) float32 (lexical: none, (0, dim)); query_texts: one per
  // query for lexical and hybrid. Returns per query a list of (id, score,
  // namespace, timestamp_ms, text, metadata, dense_rank, lexical_rank).
  py::list Search(
      py::array_t<float, py::array::c_style | py::array::forcecast> queries,
      int k, std::optional<std::string> ns,
      std::map<std::string, std::string> metadata_equals,
      std::optional<int64_t> min_timestamp_ms,
      std::optional<int64_t> max_timestamp_ms, int ef_search,
      bool include_documents, const std::string& mode,
      std::vector<std::string> query_texts, double rrf_k, double dense_weight,
      double lexical_weight, int depth, int64_t recency_half_life_ms,
      double recency_weight) const {
    index::SearchOptions options;
    if (mode == "lexical") {
      options.mode = index::SearchMode::kLexical;
    } else if (mode == "hybrid") {
      options.mode = index::SearchMode::kHybrid;
    } else if (mode != "dense") {
      throw py::value_error(
          "mode: expected 'dense', 'lexical' or 'hybrid', "
          "got '" +
          mode + "'");
    }
    options.query_texts = std::move(query_texts);
    options.fusion.rrf_k = rrf_k;
    options.fusion.dense_weight = dense_weight;
    options.fusion.lexical_weight = lexical_weight;
    options.fusion.depth = depth;
    options.k = k;
    options.filter.ns = std::move(ns);
    options.filter.metadata_equals = std::move(metadata_equals);
    options.filter.min_timestamp_ms = min_timestamp_ms;
    options.filter.max_timestamp_ms = max_timestamp_ms;
    options.ef_search = ef_search;
    options.include_documents = include_documents;
    if (recency_half_life_ms != 0 || recency_weight != 0) {
      options.recency = index::Recency{.half_life_ms = recency_half_life_ms,
                                       .weight = recency_weight};
    }
    const std::vector<float> flat(queries.data(),
                                  queries.data() + queries.size());
    auto results = ValueOrThrow(
        WithoutGil([&] { return collection_->Search(flat, options); }));
    py::list out;
    for (const auto& hits : results) {
      py::list row;
      for (const auto& h : hits) {
        row.append(py::make_tuple(
            h.id, h.score, h.record.ns, h.record.timestamp_ms, h.record.text,
            h.record.metadata, h.dense_rank, h.lexical_rank));
      }
      out.append(row);
    }
    return out;
  }

  // One read-only view per extent block, plus the segment's int64 id hashes
  // of the same rows, all sharing one owner of the mapping.
  py::tuple RowBlocks() const {
    auto rows = std::make_shared<index::AttachedRows>(collection_->Rows());
    // The capsule owns a reference to the mapping; numpy keeps the capsule.
    py::capsule owner(
        new std::shared_ptr<index::AttachedRows>(rows), [](void* p) {
          delete static_cast<std::shared_ptr<index::AttachedRows>*>(p);
        });
    py::list views, hashes, firsts, bits;
    for (const auto& block : rows->blocks) {
      views.append(RowView(*rows, block, owner));
      hashes.append(IdHashView(block, owner));
      firsts.append(block.first_row);
      bits.append(TombstoneBitsView(block, owner));
    }
    return py::make_tuple(views, hashes, firsts, bits);
  }

  py::array Tombstones() const {
    const std::vector<uint8_t> flags = collection_->Tombstones();
    py::array_t<bool> out(static_cast<py::ssize_t>(flags.size()));
    auto* dst = out.mutable_data();
    for (size_t i = 0; i < flags.size(); ++i) dst[i] = flags[i] != 0;
    return out;
  }

  std::vector<std::string> Ids() const { return collection_->Ids(); }

 private:
  std::unique_ptr<index::AttachedCollection> collection_;
};

class Embedder {
 public:
  Embedder(const std::string& model_dir, const std::string& device) {
    embed::EmbedderOptions options =
        ValueOrThrow(embed::ParseDevice(device.empty() ? "auto" : device));
    options.model_dir = model_dir;
    embedder_ = ValueOrThrow(
        WithoutGil([&] { return embed::Embedder::Create(options); }));
  }

  int dim() const { return embedder_->info().dim; }
  int max_length() const { return embedder_->info().max_length; }
  std::string name() const { return embedder_->info().name; }
  std::string device() const { return embedder_->device_description(); }

  // (n, dim) float32, one row per text.
  py::array_t<float> Embed(const std::vector<std::string>& texts) {
    const int d = dim();
    py::array_t<float> out(
        {static_cast<py::ssize_t>(texts.size()), static_cast<py::ssize_t>(d)});
    float* base = out.mutable_data();
    std::vector<std::string_view> views(texts.begin(), texts.end());
    std::vector<float*> rows(texts.size());
    for (size_t i = 0; i < texts.size(); ++i) rows[i] = base + i * d;
    ThrowIfError(WithoutGil([&] { return embedder_->EmbedInto(views, rows); }));
    return out;
  }

 private:
  std::unique_ptr<embed::Embedder> embedder_;
};

}  // namespace
}  // namespace zv::python

PYBIND11_MODULE(_attach, m) {
  using zv::python::Attached;
  using zv::python::Embedder;
  using zv::python::StatusError;
  m.doc() = "zerovec attach extension (use zerovec.attach)";
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const StatusError& e) {
      py::object error =
          py::module_::import("zerovec.errors")
              .attr("error_for")(
                  std::string(zv::StatusCodeName(e.status.code())),
                  e.status.message());
      PyErr_SetObject(error.get_type().ptr(), error.ptr());
    }
  });
  py::class_<Attached>(m, "Attached")
      .def(py::init<const std::string&, const std::string&>(),
           py::arg("data_dir"), py::arg("name"))
      .def("refresh", &Attached::Refresh)
      .def("describe", &Attached::Describe)
      .def("search", &Attached::Search, py::arg("queries"), py::arg("k"),
           py::arg("namespace"), py::arg("metadata_equals"),
           py::arg("min_timestamp_ms"), py::arg("max_timestamp_ms"),
           py::arg("ef_search"), py::arg("include_documents"),
           py::arg("mode") = "dense",
           py::arg("query_texts") = std::vector<std::string>{},
           py::arg("rrf_k") = 60.0, py::arg("dense_weight") = 1.0,
           py::arg("lexical_weight") = 1.0, py::arg("depth") = 0,
           py::arg("recency_half_life_ms") = 0, py::arg("recency_weight") = 0.0)
      .def("row_blocks", &Attached::RowBlocks)
      .def("tombstones", &Attached::Tombstones)
      .def("ids", &Attached::Ids);
  py::class_<Embedder>(m, "Embedder")
      .def(py::init<const std::string&, const std::string&>(),
           py::arg("model_dir"), py::arg("device") = "auto")
      .def_property_readonly("dim", &Embedder::dim)
      .def_property_readonly("max_length", &Embedder::max_length)
      .def_property_readonly("name", &Embedder::name)
      .def_property_readonly("device", &Embedder::device)
      .def("embed", &Embedder::Embed, py::arg("texts"));
}
