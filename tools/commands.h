// The zerovec subcommands. Each takes the arguments after its name and returns
// the process exit code: 0 ok, 2 usage error, 1 anything else (one line on
// stderr).
#ifndef ZEROVEC_TOOLS_COMMANDS_H_
#define ZEROVEC_TOOLS_COMMANDS_H_

#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "index/collection.h"
#include "tools/cli_util.h"

namespace zv::tools {

inline constexpr char kDefaultData[] = "./zerovec-data";
inline constexpr char kDefaultListen[] = "127.0.0.1:50051";

int RunBuild(const std::vector<std::string>& args);
int RunServe(const std::vector<std::string>& args);
int RunQuery(const std::vector<std::string>& args);
int RunAttach(const std::vector<std::string>& args);
int RunCompact(const std::vector<std::string>& args);
int RunCluster(const std::vector<std::string>& args);

// Prints "zerovec <command>: <message>" and returns the exit code for `s`: 2
// when `usage` (a flag problem), else 1.
int Fail(const std::string& command, const Status& s, bool usage);

// --recency-half-life-ms N [--recency-weight W] of query and attach: unset
// without a half-life; a weight alone is a usage error.
StatusOr<std::optional<index::Recency>> RecencyFromFlags(const Flags& flags);

// "flat" -> "Flat", "hnsw" -> "HNSW32", "ivfpq" -> "IVF1024,PQ32"; FAISS-style
// descriptors pass through.
StatusOr<std::string> IndexDescriptor(const std::string& flag);

}  // namespace zv::tools

#endif  // ZEROVEC_TOOLS_COMMANDS_H_
