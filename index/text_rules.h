// What ids, texts, namespaces and vectors must be, shared by the index (which
// stores them), the service (which maps a breach to INVALID_ARGUMENT naming the
// request field) and the service's wire check (invalid UTF-8 fails protobuf's
// parse before validation sees it). A small library so proto/ can use it.
#ifndef ZEROVEC_INDEX_TEXT_RULES_H_
#define ZEROVEC_INDEX_TEXT_RULES_H_

#include <cstddef>
#include <span>
#include <string>
#include <string_view>

#include "base/status.h"

namespace zv::index {

// Strings are UTF-8 (proto3 strings must be: a stored invalid one would make
// every response that carries it unparsable). OK, or INVALID_ARGUMENT "not
// valid UTF-8 (byte N)" with no field name: callers prefix theirs.
Status CheckUtf8(std::string_view s);

// Only spaces, tabs and line breaks (or nothing): no document to embed.
bool IsBlank(std::string_view s);

// The largest squared L2 norm of a stored or query vector. A dot product of
// two vectors is at most the product of their norms and an L2 distance at most
// twice their sum, so with both under this, scores stay finite in float.
inline constexpr double kMaxSquaredNorm = 3.4028234663852886e38 / 4;

// Finite values with a squared norm of at most kMaxSquaredNorm (checked in
// double). INVALID_ARGUMENT without a field name: "[j] is not finite (NaN or
// Inf)" or "squared norm ... is over the limit ...".
Status CheckVectorValues(std::span<const float> values);

}  // namespace zv::index

#endif  // ZEROVEC_INDEX_TEXT_RULES_H_
