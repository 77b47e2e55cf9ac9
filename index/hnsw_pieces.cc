// HNSW pieces: file format, manifest, in-place search, building (see
// hnsw_pieces.h for the design).
// Over 600 lines: the four share the piece layout's private helpers.
#include "index/hnsw_pieces.h"

#include <faiss/IndexHNSW.h>
#include <faiss/impl/AuxIndexStructures.h>
#include <faiss/impl/DistanceComputer.h>
#include <faiss/impl/FaissAssert.h>
#include <fcntl.h>
#include <omp.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <fstream>
#include <limits>
#include <mutex>
#include <queue>
#include <random>
#include <sstream>

#include "base/file.h"
#include "index/ann_index.h"
#include "index/distance.h"
#include "index/distance_kernel.h"
#include "index/hnsw_build.h"
#include "index/hnsw_search.h"

namespace zv::index {
namespace {

constexpr char kPieceMagic[8] = {'Z', 'V', 'P', 'I', 'E', 'C', 'E', '1'};
constexpr char kManifestMagic[8] = {'Z', 'V', 'M', 'A', 'N', 'I', 'F', '1'};
constexpr uint32_t kPieceVersion = 1;
constexpr uint32_t kManifestVersion = 1;
constexpr uint64_t kAlign = 64;
// Rows inserted between checks of the stop flag.
constexpr uint64_t kBuildBatch = 512;
// Nodes a build thread takes at a time (OpenMP's dynamic chunk).
constexpr size_t kBuildRun = 8;

std::mutex options_mu;
PieceOptions options_value;

struct PieceHeader {
  char magic[8];
  uint32_t version;
  uint32_t header_bytes;
  uint64_t begin, end;
  uint32_t row_stride, metric;
  int32_t m, max_level, entry_point;
  uint32_t ncum;
  uint64_t cum_off, levels_off, offsets_off, neighbors_off;
  uint64_t neighbors_count, file_bytes;
  uint64_t body_checksum;
  uint64_t reserved;
  uint64_t header_checksum;  // FNV-1a-64 of every byte before it
};
static_assert(sizeof(PieceHeader) == 128);

uint64_t Fnv1a64(const void* data, size_t n) {
  const auto* p = static_cast<const unsigned char*>(data);
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

// Word-at-a-time checksum of a byte stream (fast enough to check a large
// piece on every open; FNV byte-wise would take seconds).
class BodyHash {
 public:
  void Update(const void* data, size_t n) {
    const auto* p = static_cast<const unsigned char*>(data);
    while (n > 0 && fill_ > 0) {
      carry_[fill_++] = *p++;
      --n;
      if (fill_ == 8) Word(carry_), fill_ = 0;
    }
    for (; n >= 8; n -= 8, p += 8) Word(p);
    while (n > 0) carry_[fill_++] = *p++, --n;
  }
  uint64_t Final() {
    if (fill_ > 0) {
      std::memset(carry_ + fill_, 0, 8 - fill_);
      Word(carry_);
      fill_ = 0;
    }
    return h_ ^ (h_ >> 31);
  }

 private:
  void Word(const unsigned char* p) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    h_ = (h_ ^ w) * 0x9e3779b97f4a7c15ull;
    h_ ^= h_ >> 29;
  }
  uint64_t h_ = 0x243f6a8885a308d3ull;
  unsigned char carry_[8];
  int fill_ = 0;
};

uint64_t AlignUp(uint64_t x) { return (x + kAlign - 1) / kAlign * kAlign; }

faiss::MetricType FaissMetric(shm::Metric m) {
  return m == shm::Metric::kInnerProduct ? faiss::METRIC_INNER_PRODUCT
                                         : faiss::METRIC_L2;
}

// Starts writing `path` (tmp + rename) with the mode and group of the
// segment's first extent, so attached readers that may read the segment may
// read this too.
StatusOr<AtomicFileWriter> CreateBesideSegment(
    const std::filesystem::path& path, bool sync) {
  struct stat st;
  const auto extent0 = path.parent_path() / shm::ExtentFileName(0);
  const bool have = ::stat(extent0.c_str(), &st) == 0;
  ZV_ASSIGN_OR_RETURN(
      AtomicFileWriter file,
      AtomicFileWriter::Create(
          path, {.sync = sync,
                 .mode = have ? static_cast<mode_t>(st.st_mode & 0640)
                              : static_cast<mode_t>(0600)}));
  if (have) {
    // Best effort, as the group: the mode alone still keeps others out.
    [[maybe_unused]] const int ignored = ::fchown(file.fd(), -1, st.st_gid);
  }
  return file;
}

// Distances between a query and rows, or two rows, of a RangeStorage (faiss
// negates a storage's own inner products itself).
class RangeDistance : public faiss::DistanceComputer {
 public:
  RangeDistance(const RowTable& rows, uint64_t begin, size_t d, bool ip)
      : rows_(rows), begin_(begin), d_(d), ip_(ip) {}
  void set_query(const float* x) override { q_ = x; }
  float operator()(idx_t i) override { return Dis(q_, Row(i)); }
  float symmetric_dis(idx_t i, idx_t j) override { return Dis(Row(i), Row(j)); }

 private:
  const float* Row(idx_t i) const { return rows_.Row(begin_ + i); }
  float Dis(const float* a, const float* b) const {
    return ip_ ? InnerProduct16(a, b, d_) : L2Sqr16(a, b, d_);
  }
  const RowTable& rows_;
  uint64_t begin_;
  size_t d_;
  bool ip_;
  const float* q_ = nullptr;
};

// omp locks for every node of a graph, destroyed with it.
class NodeLocks {
 public:
  explicit NodeLocks(size_t n) : locks_(n) {
    for (omp_lock_t& l : locks_) omp_init_lock(&l);
  }
  ~NodeLocks() {
    for (omp_lock_t& l : locks_) omp_destroy_lock(&l);
  }
  std::vector<omp_lock_t>& get() { return locks_; }

 private:
  std::vector<omp_lock_t> locks_;
};

}  // namespace

void SetPieceOptions(const PieceOptions& options) {
  std::lock_guard<std::mutex> l(options_mu);
  options_value = options;
}

PieceOptions GetPieceOptions() {
  std::lock_guard<std::mutex> l(options_mu);
  return options_value;
}

RowTable::RowTable(const shm::SegmentView& view, uint64_t rows)
    : rpe_(view.info().rows_per_extent),
      stride_(view.info().row_stride),
      rows_(rows) {
  rpe_shift_ = std::has_single_bit(rpe_) ? std::countr_zero(rpe_) : -1;
  // Blocks(rows) ends at row `rows`: every block but the last is a whole
  // extent.
  for (const shm::RowBlock& b : view.Blocks(rows)) {
    bases_.push_back(b.rows);
    firsts_.push_back(b.first_row);
    counts_.push_back(b.count);
  }
  // The first whole extent of rows_per_extent rows: all later ones are that
  // size too (growing extents hold fewer), so rows from there on are found by
  // division; the last block may be cut short, which division still handles.
  fixed_first_block_ = bases_.size();
  for (size_t i = 0; i < bases_.size(); ++i) {
    const bool last = i + 1 == bases_.size();
    if (!last && counts_[i] == rpe_) {
      fixed_first_block_ = i;
      break;
    }
  }
  fixed_first_row_ = fixed_first_block_ < bases_.size()
                         ? firsts_[fixed_first_block_]
                         : ~uint64_t{0};
}

RangeStorage::RangeStorage(const RowTable& rows, uint64_t begin, size_t d,
                           shm::Metric metric)
    : faiss::Index(static_cast<idx_t>(d), FaissMetric(metric)),
      rows_(rows),
      begin_(begin) {
  is_trained = true;
}

void RangeStorage::add(idx_t n, const float* x) {
  FAISS_THROW_IF_NOT_MSG(x == rows_.Row(begin_ + ntotal),
                         "HNSW piece: rows must be segment rows");
  ntotal += n;
}

void RangeStorage::search(idx_t, const float*, idx_t, float*, idx_t*,
                          const faiss::SearchParameters*) const {
  FAISS_THROW_MSG("RangeStorage::search: search through the HNSW graph");
}

void RangeStorage::reconstruct(idx_t key, float* recons) const {
  std::memcpy(recons, rows_.Row(begin_ + key), sizeof(float) * d);
}

const float* RangeStorage::Row(idx_t i) const { return rows_.Row(begin_ + i); }

namespace {

// Orders `nodes` (level 0, already shuffled) as PieceOptions::build_order_*
// say: the first `random_fraction` stay in random order, the rest are sorted
// by the signs of their rows' projections on `bits` random hyperplanes, in
// `stripes` interleaved stripes (0: `threads`). False if a node went missing.
bool OrderForLocality(const RangeStorage& storage, size_t stride, int bits,
                      double random_fraction, int stripes, int threads,
                      std::vector<int>* nodes) {
  bits = std::min(bits, 31);
  const size_t skip =
      static_cast<size_t>(std::clamp(random_fraction, 0.0, 1.0) *
                          static_cast<double>(nodes->size()));
  if (bits <= 0 || nodes->size() - skip < 2) return true;
  // Hyperplanes padded to the row stride (zeros past the dimension).
  std::vector<float> planes(static_cast<size_t>(bits) * stride, 0.f);
  std::mt19937_64 rng(4242);
  std::normal_distribution<float> normal;
  for (int b = 0; b < bits; ++b)
    for (size_t j = 0; j < static_cast<size_t>(storage.d); ++j)
      planes[b * stride + j] = normal(rng);
  std::vector<std::pair<uint32_t, int>> keyed(nodes->size() - skip);
  const RowTable& rt = storage.rows();
  const uint64_t first = storage.begin();
#pragma omp parallel for num_threads(std::max(threads, 1)) schedule(static)
  for (size_t i = 0; i < keyed.size(); ++i) {
    const int v = (*nodes)[skip + i];
    const float* r = rt.Row(first + static_cast<uint64_t>(v));
    uint32_t key = 0;
    for (int b = 0; b < bits; ++b) {
      const float dot =
          kernel::Distance<false>(planes.data() + b * stride, r, stride);
      key = (key << 1) | (dot > 0 ? 1u : 0u);
    }
    keyed[i] = {key, v};
  }
  // Stable: equal codes keep their random order.
  std::stable_sort(
      keyed.begin(), keyed.end(),
      [](const auto& a, const auto& b) { return a.first < b.first; });
  // Stripes of the sorted order, their runs of kBuildRun nodes interleaved (a
  // thread takes kBuildRun at a time: it inserts a run in order).
  const size_t m = keyed.size();
  const size_t n_stripes =
      std::clamp<size_t>(stripes > 0 ? stripes : std::max(threads, 1), 1, m);
  const size_t stripe = (m + n_stripes - 1) / n_stripes;
  size_t out = skip;
  for (size_t r = 0; r < stripe; r += kBuildRun)
    for (size_t s = 0; s < n_stripes; ++s)
      for (size_t i = s * stripe + r;
           i < std::min({s * stripe + r + kBuildRun, (s + 1) * stripe, m}); ++i)
        (*nodes)[out++] = keyed[i].second;
  // Every node exactly once: a node left out would be missing from the graph.
  return out == nodes->size();
}

}  // namespace

Status InsertLevelsFirst(faiss::IndexHNSW& index, RangeStorage& storage,
                         uint64_t n, const std::atomic<bool>* stop,
                         int threads) {
  faiss::HNSW& h = index.hnsw;
  const auto n0 = static_cast<size_t>(index.ntotal), ntotal = n0 + n;
  if (storage.ntotal != index.ntotal)
    return InternalError("HNSW insert: storage and graph sizes differ");
  ZV_RETURN_IF_ERROR(CatchFaiss(
      "HNSW insert", [&] { h.prepare_level_tab(n, /*preset_levels=*/false); }));
  storage.ntotal = index.ntotal = static_cast<faiss::Index::idx_t>(ntotal);
  // Nodes by level; each level in a random order (as faiss: no bias from
  // the order rows arrived in).
  std::vector<std::vector<int>> by_level;
  for (size_t i = n0; i < ntotal; ++i) {
    const auto l = static_cast<size_t>(h.levels[i] - 1);
    if (l >= by_level.size()) by_level.resize(l + 1);
    by_level[l].push_back(static_cast<int>(i));
  }
  std::mt19937_64 rng(789 + n0);
  NodeLocks locks(ntotal);
  std::mutex entry_mu;
  GraphBuild build;
  build.h = &h;
  build.rows = &storage.rows();
  build.begin = storage.begin();
  build.stride = static_cast<size_t>(storage.d);
  build.ip = storage.metric_type == faiss::METRIC_INNER_PRODUCT;
  build.locks = locks.get().data();
  build.entry_mu = &entry_mu;
  build.prefetch_rows =
      std::clamp(GetPieceOptions().build_prefetch_rows, 1, 64);
  // Every node's row as bf16 (the nodes already in are linked to as well).
  std::vector<uint16_t> bf16;
  if (GetPieceOptions().bf16_build) {
    const size_t stride = build.stride;
    ZV_RETURN_IF_ERROR(CatchFaiss("HNSW insert", [&] {
      bf16.resize(ntotal * stride);  // bad_alloc reported, not thrown on
    }));
    const RowTable& rt = storage.rows();
    const uint64_t first = storage.begin();
#pragma omp parallel for num_threads(std::max(threads, 1)) schedule(static)
    for (size_t i = 0; i < ntotal; ++i) {
      const float* r = rt.Row(first + i);
      uint16_t* o = bf16.data() + i * stride;
      for (size_t j = 0; j < stride; ++j) o[j] = kernel::ToBf16(r[j]);
    }
    build.bf16 = bf16.data();
  }
  const size_t chunk = kBuildBatch * static_cast<size_t>(std::max(threads, 1));
  for (int l = static_cast<int>(by_level.size()) - 1; l >= 0; --l) {
    std::vector<int>& nodes = by_level[l];
    std::shuffle(nodes.begin(), nodes.end(), rng);
    if (l == 0) {
      const PieceOptions po = GetPieceOptions();
      if (!OrderForLocality(storage, build.stride, po.build_order_bits,
                            po.build_order_random_fraction,
                            po.build_order_stripes, threads, &nodes))
        return InternalError("HNSW insert: level-0 order lost a node");
    }
    for (size_t c0 = 0; c0 < nodes.size(); c0 += chunk) {
      if (stop && stop->load(std::memory_order_relaxed))
        return CancelledError("HNSW piece build stopped");
      const size_t c1 = std::min(nodes.size(), c0 + chunk);
      std::atomic<bool> failed{false};
#pragma omp parallel for num_threads(std::max(threads, 1)) \
    schedule(dynamic, kBuildRun) if (c1 - c0 > 64)
      for (size_t i = c0; i < c1; ++i) {
        try {
          InsertNode(build, nodes[i]);
        } catch (...) {  // never out of an OpenMP region
          failed = true;
        }
      }
      if (failed) return InternalError("HNSW insert failed");
    }
  }
  return OkStatus();
}

faiss::DistanceComputer* RangeStorage::get_distance_computer() const {
  return new RangeDistance(rows_, begin_, d,
                           metric_type == faiss::METRIC_INNER_PRODUCT);
}

std::string PieceFileName(uint64_t serial) {
  char buf[40];
  std::snprintf(buf, sizeof(buf), "hnsw.piece.%08llu",
                static_cast<unsigned long long>(serial));
  return buf;
}

// ---------------------------------------------------------------------------
// Piece

Piece::~Piece() {
  if (map_ != nullptr) ::munmap(map_, map_bytes_);
}

namespace {

// Why a piece's graph arrays break a bound the search relies on; empty if they
// do not. The sections are known to lie inside the file.
std::string GraphProblem(const PieceHeader& h, const int32_t* cum,
                         const int32_t* levels, const uint64_t* offsets,
                         const int32_t* neighbors) {
  const uint64_t n = h.end - h.begin;
  if (cum[0] != 0) return "bad layer table";
  for (size_t l = 1; l < h.ncum; ++l) {
    if (cum[l] <= cum[l - 1]) return "bad layer table";
  }
  if (h.max_level < 0 || h.max_level + 2 > static_cast<int>(h.ncum) ||
      h.entry_point < 0 || static_cast<uint64_t>(h.entry_point) >= n ||
      levels[h.entry_point] != h.max_level + 1)
    return "bad entry point";
  if (offsets[0] != 0 || offsets[n] != h.neighbors_count)
    return "bad link offsets";
  for (uint64_t i = 0; i < n; ++i) {
    const int32_t lv = levels[i];
    if (lv < 1 || lv > h.max_level + 1 ||
        offsets[i + 1] - offsets[i] != static_cast<uint64_t>(cum[lv]) ||
        offsets[i + 1] < offsets[i])
      return "bad node " + std::to_string(i);
  }
  for (uint64_t j = 0; j < h.neighbors_count; ++j) {
    const int32_t v = neighbors[j];
    if (v < -1 || v >= static_cast<int64_t>(n)) return "link out of range";
  }
  return "";
}

}  // namespace

StatusOr<std::shared_ptr<const Piece>> Piece::Open(
    const std::filesystem::path& path, uint64_t serial,
    const shm::SegmentInfo& info) {
  const std::string name = path.string();
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return NotFoundError(name + ": no such piece");
    return ErrnoError(errno, "open " + name);
  }
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return ErrnoError(err, "fstat " + name);
  }
  const size_t bytes = static_cast<size_t>(st.st_size);
  auto bad = [&](const std::string& why) {
    return DataLossError(name + ": damaged HNSW piece: " + why);
  };
  if (bytes < sizeof(PieceHeader)) {
    ::close(fd);
    return bad("file too short");
  }
  void* map = ::mmap(nullptr, bytes, PROT_READ, MAP_SHARED, fd, 0);
  const int err = errno;
  ::close(fd);
  if (map == MAP_FAILED) return ErrnoError(err, "mmap " + name);
  std::shared_ptr<Piece> p(new Piece());
  p->map_ = map;
  p->map_bytes_ = bytes;
  p->serial_ = serial;
  const auto* base = static_cast<const char*>(map);
  PieceHeader h;
  std::memcpy(&h, base, sizeof(h));
  if (std::memcmp(h.magic, kPieceMagic, 8) != 0) return bad("bad magic");
  if (h.header_checksum != Fnv1a64(&h, offsetof(PieceHeader, header_checksum)))
    return bad("header checksum mismatch");
  if (h.version != kPieceVersion || h.header_bytes != sizeof(PieceHeader))
    return bad("unsupported format version " + std::to_string(h.version));
  if (h.file_bytes != bytes) return bad("size differs from its header");
  if (h.row_stride != info.row_stride ||
      h.metric != static_cast<uint32_t>(info.metric))
    return bad("built for another segment layout");
  const uint64_t n = h.end - h.begin;
  if (h.end <= h.begin || n >= (uint64_t{1} << 31) || h.ncum < 2 ||
      h.ncum > 64 || h.m < 1)
    return bad("bad sizes");
  auto fits = [&](uint64_t off, uint64_t count, uint64_t elem) {
    return off >= sizeof(PieceHeader) && off % 8 == 0 && off <= bytes &&
           count <= (bytes - off) / elem;
  };
  if (!fits(h.cum_off, h.ncum, 4) || !fits(h.levels_off, n, 4) ||
      !fits(h.offsets_off, n + 1, 8) ||
      !fits(h.neighbors_off, h.neighbors_count, 4))
    return bad("section outside the file");
  BodyHash hash;
  hash.Update(base + sizeof(PieceHeader), bytes - sizeof(PieceHeader));
  if (hash.Final() != h.body_checksum) return bad("body checksum mismatch");
  p->begin_ = h.begin;
  p->end_ = h.end;
  p->m_ = h.m;
  p->max_level_ = h.max_level;
  p->entry_point_ = h.entry_point;
  p->ip_ = info.metric == shm::Metric::kInnerProduct;
  p->stride_ = info.row_stride;
  p->ncum_ = h.ncum;
  p->nlinks_ = h.neighbors_count;
  p->cum_ = reinterpret_cast<const int32_t*>(base + h.cum_off);
  p->levels_ = reinterpret_cast<const int32_t*>(base + h.levels_off);
  p->offsets_ = reinterpret_cast<const uint64_t*>(base + h.offsets_off);
  p->neighbors_ = reinterpret_cast<const int32_t*>(base + h.neighbors_off);
  // Every bound the search relies on, so it needs no checks of its own.
  if (std::string why =
          GraphProblem(h, p->cum_, p->levels_, p->offsets_, p->neighbors_);
      !why.empty())
    return bad(why);
  return std::shared_ptr<const Piece>(std::move(p));
}

void SearchGraph(const GraphRef& g, const shm::SegmentView& view,
                 const float* query, int k, int ef,
                 const faiss::IDSelector* sel, float* dist, int64_t* rows) {
  const RowTable table(view, g.begin + g.nodes);
  SearchGraphRows(g, table, query, k, ef, sel, dist, rows);
}

GraphRef Piece::graph() const {
  return GraphRef{begin_,  size(), max_level_, entry_point_, ip_,
                  stride_, cum_,   offsets_,   neighbors_};
}

void Piece::Search(const shm::SegmentView& view, const float* query, int k,
                   int ef, const faiss::IDSelector* sel, float* dist,
                   int64_t* rows) const {
  SearchGraph(graph(), view, query, k, ef, sel, dist, rows);
}

void Piece::Search(const RowTable& table, const float* query, int k, int ef,
                   const faiss::IDSelector* sel, float* dist,
                   int64_t* rows) const {
  SearchGraphRows(graph(), table, query, k, ef, sel, dist, rows);
}

Piece::Graph Piece::CopyGraph() const {
  Graph g;
  const uint64_t n = size();
  g.cum.assign(cum_, cum_ + ncum_);
  g.levels.assign(levels_, levels_ + n);
  g.offsets.assign(offsets_, offsets_ + n + 1);
  g.neighbors.assign(neighbors_, neighbors_ + nlinks_);
  g.entry_point = entry_point_;
  g.max_level = max_level_;
  return g;
}

// ---------------------------------------------------------------------------
// Manifest

StatusOr<std::optional<Manifest>> ReadManifest(
    const std::filesystem::path& dir) {
  const auto path = dir / kManifestFile;
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    if (!std::filesystem::exists(path)) return std::optional<Manifest>();
    return ErrnoError(errno, "open " + path.string());
  }
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string s = ss.str();
  auto bad = [&](const std::string& why) {
    return DataLossError(path.string() + ": damaged HNSW manifest: " + why);
  };
  constexpr size_t kFixed = 8 + 4 + 4 + 8 + 8;
  if (s.size() < kFixed + 8) return bad("too short");
  if (std::memcmp(s.data(), kManifestMagic, 8) != 0) return bad("bad magic");
  uint64_t sum;
  std::memcpy(&sum, s.data() + s.size() - 8, 8);
  if (sum != Fnv1a64(s.data(), s.size() - 8)) return bad("checksum mismatch");
  uint32_t version, count;
  Manifest m;
  std::memcpy(&version, s.data() + 8, 4);
  std::memcpy(&count, s.data() + 12, 4);
  std::memcpy(&m.version, s.data() + 16, 8);
  std::memcpy(&m.next_serial, s.data() + 24, 8);
  if (version != kManifestVersion)
    return bad("unsupported format version " + std::to_string(version));
  if (s.size() != kFixed + 24 * uint64_t{count} + 8) return bad("bad size");
  uint64_t expect = 0;
  for (uint32_t i = 0; i < count; ++i) {
    ManifestEntry e;
    std::memcpy(&e, s.data() + kFixed + 24 * i, 24);
    if (e.begin != expect || e.end <= e.begin || e.serial >= m.next_serial)
      return bad("pieces not contiguous");
    expect = e.end;
    m.entries.push_back(e);
  }
  return std::optional<Manifest>(std::move(m));
}

Status WriteManifest(const std::filesystem::path& dir, const Manifest& m) {
  std::string s(kManifestMagic, 8);
  auto put = [&](const void* p, size_t n) {
    s.append(static_cast<const char*>(p), n);
  };
  const uint32_t version = kManifestVersion;
  const uint32_t count = static_cast<uint32_t>(m.entries.size());
  put(&version, 4);
  put(&count, 4);
  put(&m.version, 8);
  put(&m.next_serial, 8);
  for (const ManifestEntry& e : m.entries) put(&e, 24);
  const uint64_t sum = Fnv1a64(s.data(), s.size());
  put(&sum, 8);
  // Synced: a lost manifest drops every piece, and rebuilding them takes long.
  ZV_ASSIGN_OR_RETURN(AtomicFileWriter f,
                      CreateBesideSegment(dir / kManifestFile, /*sync=*/true));
  ZV_RETURN_IF_ERROR(f.Append(s));
  return f.Commit();
}

std::shared_ptr<const PieceList> MapPieces(const std::filesystem::path& dir,
                                           const Manifest& manifest,
                                           const shm::SegmentInfo& info,
                                           uint64_t limit,
                                           const PieceList* reuse,
                                           Status* bad) {
  auto list = std::make_shared<PieceList>();
  list->version = manifest.version;
  for (const ManifestEntry& e : manifest.entries) {
    if (e.end > limit) {
      if (bad)
        *bad = DataLossError(PieceFileName(e.serial) + " ends at row " +
                             std::to_string(e.end) + ", past the " +
                             std::to_string(limit) + " committed rows");
      break;
    }
    std::shared_ptr<const Piece> p;
    for (size_t i = 0; reuse && i < reuse->pieces.size() && !p; ++i) {
      const auto& q = reuse->pieces[i];
      if (q->serial() == e.serial && q->begin() == e.begin && q->end() == e.end)
        p = q;
    }
    if (!p) {
      auto opened = Piece::Open(dir / PieceFileName(e.serial), e.serial, info);
      if (opened.ok() &&
          ((*opened)->begin() != e.begin || (*opened)->end() != e.end)) {
        opened = DataLossError(PieceFileName(e.serial) +
                               ": rows differ from the manifest's");
      }
      if (!opened.ok()) {
        if (bad) *bad = opened.status();
        break;
      }
      p = std::move(opened).value();
    }
    list->pieces.push_back(std::move(p));
  }
  return list;
}

StatusOr<uint64_t> SearchPieces(const PieceList& list,
                                const shm::SegmentView& view,
                                const float* queries, size_t nq,
                                const faiss::IDSelector* sel, int ef,
                                uint64_t limit, TopK* out) {
  const size_t stride = view.info().row_stride;
  const int k = out->k;
  uint64_t reach = 0;  // the rows the searched pieces read
  for (const auto& p : list.pieces) {
    if (p->end() > limit || p->begin() != reach) break;
    reach = p->end();
  }
  if (reach == 0) return uint64_t{0};
  // Row pointers once per call, not a segment lookup per distance.
  const RowTable table(view, reach);
  uint64_t covered = 0;
  TopK part(nq, k, out->metric);
  for (const auto& p : list.pieces) {
    if (p->end() > reach) break;
      // Several queries (SearchBatch) spread over threads; one runs inline.
#pragma omp parallel for if (nq > 1) schedule(dynamic)
    for (size_t q = 0; q < nq; ++q) {
      p->Search(table, queries + q * stride, k, ef, sel, &part.dist[q * k],
                &part.rows[q * k]);
    }
    out->Merge(part);
    covered = p->end();
  }
  return covered;
}

// ---------------------------------------------------------------------------
// Building

StatusOr<std::shared_ptr<const Piece>> BuildPiece(
    const std::filesystem::path& dir, uint64_t serial,
    const shm::SegmentInfo& info, const RowTable& rows, int m, int efc,
    uint64_t begin, uint64_t end, const Piece* base,
    const std::atomic<bool>* stop, int threads) {
  if (end <= begin || end > rows.rows() || end - begin >= (uint64_t{1} << 31))
    return InvalidArgumentError("HNSW piece: bad row range");
  if (base && (base->begin() != begin || base->end() > end || base->m() != m))
    base = nullptr;
  const size_t d = info.row_stride;
  RangeStorage storage(rows, begin, d, info.metric);
  faiss::IndexHNSW index(&storage, m);  // does not own the storage
  index.hnsw.efConstruction = efc;
  uint64_t next = begin;
  if (base) {
    Piece::Graph g = base->CopyGraph();
    if (g.cum != index.hnsw.cum_nneighbor_per_level) {
      base = nullptr;
    } else {
      index.hnsw.levels = std::move(g.levels);
      index.hnsw.offsets = std::move(g.offsets);
      index.hnsw.neighbors = std::move(g.neighbors);
      index.hnsw.entry_point = g.entry_point;
      index.hnsw.max_level = g.max_level;
      storage.ntotal = index.ntotal = base->size();
      next = base->end();
    }
  }
  // As one faiss add of every row (upper levels first): adds in small
  // batches built graphs 10-30 recall points worse at the same M and
  // efConstruction (bench/hnsw_bisect, issue 21).
  ZV_RETURN_IF_ERROR(InsertLevelsFirst(index, storage, end - next, stop,
                                       std::max(1, threads)));
  if (stop && stop->load(std::memory_order_relaxed))
    return CancelledError("HNSW piece build stopped");

  return WritePiece(dir, serial, info, index.hnsw, m, begin, end);
}

StatusOr<std::shared_ptr<const Piece>> WritePiece(
    const std::filesystem::path& dir, uint64_t serial,
    const shm::SegmentInfo& info, const faiss::HNSW& h, int m, uint64_t begin,
    uint64_t end) {
  const uint64_t n = end - begin;
  PieceHeader hd{};
  std::memcpy(hd.magic, kPieceMagic, 8);
  hd.version = kPieceVersion;
  hd.header_bytes = sizeof(PieceHeader);
  hd.begin = begin;
  hd.end = end;
  hd.row_stride = info.row_stride;
  hd.metric = static_cast<uint32_t>(info.metric);
  hd.m = m;
  hd.max_level = h.max_level;
  hd.entry_point = h.entry_point;
  hd.ncum = static_cast<uint32_t>(h.cum_nneighbor_per_level.size());
  hd.cum_off = AlignUp(sizeof(PieceHeader));
  hd.levels_off = AlignUp(hd.cum_off + 4 * uint64_t{hd.ncum});
  hd.offsets_off = AlignUp(hd.levels_off + 4 * n);
  hd.neighbors_off = AlignUp(hd.offsets_off + 8 * (n + 1));
  hd.neighbors_count = h.neighbors.size();
  hd.file_bytes = hd.neighbors_off + 4 * hd.neighbors_count;
  static_assert(sizeof(size_t) == 8 && sizeof(int) == 4);
  if (h.levels.size() != n || h.offsets.size() != n + 1)
    return InternalError("HNSW piece: graph sizes disagree with its rows");
  // Sections in file order, each followed by zero padding to the next.
  struct Section {
    const void* data;
    uint64_t bytes, next_off;
  };
  const Section sections[] = {
      {h.cum_nneighbor_per_level.data(), 4 * uint64_t{hd.ncum}, hd.levels_off},
      {h.levels.data(), 4 * n, hd.offsets_off},
      {h.offsets.data(), 8 * (n + 1), hd.neighbors_off},
      {h.neighbors.data(), 4 * hd.neighbors_count, hd.file_bytes},
  };
  BodyHash hash;
  const char zeros[kAlign] = {};
  uint64_t pos = hd.cum_off;
  if (pos != sizeof(PieceHeader)) return InternalError("piece layout");
  for (const Section& s : sections) {
    hash.Update(s.data, s.bytes);
    hash.Update(zeros, s.next_off - pos - s.bytes);
    pos = s.next_off;
  }
  hd.body_checksum = hash.Final();
  hd.header_checksum = Fnv1a64(&hd, offsetof(PieceHeader, header_checksum));

  const auto path = dir / PieceFileName(serial);
  // Synced: it must be on disk before a (synced) manifest lists it.
  ZV_ASSIGN_OR_RETURN(AtomicFileWriter f,
                      CreateBesideSegment(path, /*sync=*/true));
  ZV_RETURN_IF_ERROR(f.Append(&hd, sizeof(hd)));
  pos = hd.cum_off;
  for (const Section& s : sections) {
    ZV_RETURN_IF_ERROR(f.Append(s.data, s.bytes));
    ZV_RETURN_IF_ERROR(f.Append(zeros, s.next_off - pos - s.bytes));
    pos = s.next_off;
  }
  ZV_RETURN_IF_ERROR(f.Commit());
  return Piece::Open(path, serial, info);
}

}  // namespace zv::index
