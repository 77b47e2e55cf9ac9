// Small helpers shared by the zerovec subcommands: flag parsing, vector files,
// hit output (the same table / JSON for `query` and `attach`), progress lines.
#ifndef ZEROVEC_TOOLS_CLI_UTIL_H_
#define ZEROVEC_TOOLS_CLI_UTIL_H_

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <ostream>
#include <set>
#include <string>
#include <vector>

#include "base/status.h"
#include "embed/embedder.h"
#include "index/collection.h"

namespace zv::tools {

// A usage error: exit code 2.
struct UsageError {
  std::string message;
};

// Parses "--name value", "--name=value" and "-k N"; boolean flags take no
// value.
class Flags {
 public:
  // `with_value` and `booleans` name the accepted flags without dashes ("data",
  // "k").
  static StatusOr<Flags> Parse(const std::vector<std::string>& args,
                               const std::set<std::string>& with_value,
                               const std::set<std::string>& booleans);

  bool Has(const std::string& name) const { return values_.count(name) > 0; }
  std::string Get(const std::string& name,
                  const std::string& fallback = "") const;
  // Usage error when missing.
  StatusOr<std::string> Require(const std::string& name) const;
  // Usage error when not an integer in [min, max].
  StatusOr<int64_t> GetInt(const std::string& name, int64_t fallback,
                           int64_t min, int64_t max) const;
  // Usage error when not a finite number in [min, max].
  StatusOr<double> GetDouble(const std::string& name, double fallback,
                             double min, double max) const;

 private:
  std::map<std::string, std::string> values_;
};

// Errors of kind INVALID_ARGUMENT from Flags are usage errors (exit 2).
inline bool IsUsageError(const Status& s) {
  return s.code() == StatusCode::kInvalidArgument;
}

inline constexpr char kBundledModelName[] = "zerovec-mini";
inline constexpr char kModelEnv[] = "ZEROVEC_MODEL";

// The model folder: --model's value ("none": "", no model, only ever when
// asked for), else $ZEROVEC_MODEL, else the bundled model beside the program
// (<bundle>/share/zerovec/models/zerovec-mini with the binary in <bundle>/bin,
// or Bazel runfiles / the workspace), else ./models/zerovec-mini. Not found:
// FAILED_PRECONDITION naming every place it looked, never a silent "none".
StatusOr<std::string> ResolveModelDir(const Flags& flags);

// --device / --devices (build, serve): where text is embedded. --devices
// (embed::ParseDevices: "all" or "cuda:0,cuda:1", ...) wins; --device alone
// is one device as before. Both given: --device must be auto or one of
// --devices' devices, else a usage error naming both.
struct DeviceChoice {
  bool from_devices = false;                    // --devices was given
  std::string devices_flag;                     // its value
  std::vector<embed::EmbedderOptions> devices;  // one per encoder
  // The CUDA ordinals among `devices`, in order (repeats kept).
  std::vector<int> CudaDevices() const;
};
StatusOr<DeviceChoice> ParseDeviceFlags(const Flags& flags);

// Opening <data>/meta failed with `s`. RocksDB's "lock file" error (another
// process holds the data dir) becomes a FAILED_PRECONDITION naming the holder's
// pid where it can be told and `instead` (what to do about a server holding
// it; a build or compact holding it is to be waited for); others get context.
Status DataDirOpenError(const std::string& data, const Status& s,
                        const std::string& instead);

// --group NAME, checked before any work: INVALID_ARGUMENT (a usage error) for
// an empty or unknown group, PERMISSION_DENIED if the caller is not in it.
Status CheckGroupFlag(const std::string& group);

// Reads floats separated by whitespace or commas, optionally in [ ].
StatusOr<std::vector<float>> ReadVectorFile(const std::filesystem::path& path);

// Reads a whole small file (e.g. a token), trailing whitespace trimmed.
StatusOr<std::string> ReadSecretFile(const std::filesystem::path& path);

// A failed RPC to `server` (grpc::Status' code and message) as the command's
// error: never a usage error of the command, so FAILED_PRECONDITION.
Status RpcError(const std::string& server, int code,
                const std::string& message);

struct OutputHit {
  std::string id;
  float score = 0;
  std::string ns;
  std::string text;
  std::map<std::string, std::string> metadata;
  // Lexical or hybrid searches: the hit's dense and lexical ranks (0: not in
  // that ranking), shown as columns / JSON fields.
  bool show_ranks = false;
  uint32_t dense_rank = 0, lexical_rank = 0;
};

// --mode dense|lexical|hybrid (default dense).
StatusOr<index::SearchMode> ParseSearchMode(const std::string& mode);
// --rrf-k, --dense-weight, --lexical-weight (defaults as in index::
// FusionOptions).
StatusOr<index::FusionOptions> ParseFusionFlags(const Flags& flags);

// A table (rank, score, id, namespace, text) or, with json, {"hits":[...]}
// (metadata too, where a hit has any).
void PrintHits(const std::vector<OutputHit>& hits, bool json,
               std::ostream& out);

// Progress of a bulk job whose size is known as a fraction of its input (bytes
// read, rows mapped): a redrawn bar on a terminal, plain lines otherwise (at
// most one a second, one every 5 s when the fraction moves slowly).
class Progress {
 public:
  Progress(std::string label, bool tty);
  // `rows` done so far; `fraction` of the input consumed, in [0, 1].
  void Update(uint64_t rows, double fraction);
  void Finish(uint64_t rows);

 private:
  std::string Line(uint64_t rows, double fraction) const;

  std::string label_;
  bool tty_;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_print_;
  double last_fraction_ = 0;
  uint64_t last_rows_ = ~uint64_t{0};
};

}  // namespace zv::tools

#endif  // ZEROVEC_TOOLS_CLI_UTIL_H_
