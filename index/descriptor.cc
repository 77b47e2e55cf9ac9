#include "index/descriptor.h"

#include <charconv>
#include <string_view>

namespace zv::index {
namespace {

// Parses the decimal number after `prefix` at the start of `s`; -1 if none.
int NumberAfter(std::string_view s, std::string_view prefix) {
  if (s.substr(0, prefix.size()) != prefix) return -1;
  s.remove_prefix(prefix.size());
  int v = -1;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size()) return -1;
  return v;
}

Status Bad(const std::string& descriptor, std::string_view why) {
  return InvalidArgumentError(
      "index.descriptor '" + descriptor + "': " + std::string(why) +
      " (expected \"Flat\", \"HNSW<M>\" or \"IVF<nlist>,PQ<m>\")");
}

}  // namespace

StatusOr<IndexKind> ParseDescriptor(const std::string& descriptor,
                                    uint32_t dim) {
  IndexKind kind;
  if (descriptor == "Flat") return kind;
  if (descriptor.rfind("HNSW", 0) == 0) {
    kind.type = IndexKind::kHnsw;
    kind.hnsw_m = NumberAfter(descriptor, "HNSW");
    if (kind.hnsw_m < 4 || kind.hnsw_m > 256)
      return Bad(descriptor, "M must be in [4, 256]");
    return kind;
  }
  const size_t comma = descriptor.find(',');
  if (descriptor.rfind("IVF", 0) == 0 && comma != std::string::npos) {
    kind.type = IndexKind::kIvfPq;
    kind.nlist =
        NumberAfter(std::string_view(descriptor).substr(0, comma), "IVF");
    kind.pq_m =
        NumberAfter(std::string_view(descriptor).substr(comma + 1), "PQ");
    if (kind.nlist < 1 || kind.nlist > (1 << 20)) {
      return Bad(descriptor, "nlist must be in [1, 1048576]");
    }
    if (kind.pq_m < 1 || dim % kind.pq_m != 0) {
      return Bad(descriptor,
                 "PQ m must divide the dimension " + std::to_string(dim));
    }
    return kind;
  }
  return Bad(descriptor, "unknown index type");
}

}  // namespace zv::index
