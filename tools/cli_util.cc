#include "tools/cli_util.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "base/group.h"

namespace zv::tools {

Status CheckGroupFlag(const std::string& group) {
  if (group.empty()) return InvalidArgumentError("--group: empty");
  return ResolveGroup(group).status().WithContext("--group");
}

namespace {

// Where the bundled model may be, best first: beside the program in a
// relocatable bundle (<bundle>/bin/zerovec), in a Bazel binary's or test's
// runfiles, in the source tree above a bazel-out binary, then ./models.
std::vector<std::filesystem::path> ModelCandidates() {
  namespace fs = std::filesystem;
  const fs::path rel = fs::path("models") / kBundledModelName;
  std::vector<fs::path> out;
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    out.push_back(exe.parent_path().parent_path() / "share/zerovec" / rel);
    out.push_back(fs::path(exe.string() + ".runfiles") / "zerovec" / rel);
  }
  for (const char* var : {"RUNFILES_DIR", "TEST_SRCDIR"}) {
    if (const char* dir = std::getenv(var); dir && *dir)
      out.push_back(fs::path(dir) / "zerovec" / rel);
  }
  // bazel-bin/tools/zerovec lives under <output base>/execroot/zerovec, whose
  // top-level entries link to the workspace's.
  if (!ec) {
    for (fs::path dir = exe.parent_path(); dir.has_relative_path();
         dir = dir.parent_path()) {
      if (dir.filename() == "bazel-out") {
        out.push_back(dir.parent_path() / rel);
        break;
      }
    }
  }
  out.push_back(fs::absolute(rel, ec));
  return out;
}

}  // namespace

StatusOr<std::string> ResolveModelDir(const Flags& flags) {
  if (flags.Has("model")) {
    const std::string model = flags.Get("model");
    if (model.empty())
      return InvalidArgumentError("--model: empty (a folder, or none)");
    return model == "none" ? std::string() : model;
  }
  if (const char* env = std::getenv(kModelEnv); env && *env) {
    std::error_code ec;
    if (!std::filesystem::exists(std::filesystem::path(env) / "config.json",
                                 ec)) {
      return FailedPreconditionError(std::string(kModelEnv) + "=" + env +
                                     ": no model there (no config.json)");
    }
    return std::string(env);
  }
  std::string looked;
  for (const auto& dir : ModelCandidates()) {
    std::error_code ec;
    if (std::filesystem::exists(dir / "config.json", ec)) return dir.string();
    looked += (looked.empty() ? "" : ", ") + dir.string();
  }
  return FailedPreconditionError(std::string("no model found (looked in ") +
                                 kModelEnv + " (unset), " + looked +
                                 "); pass --model DIR, set " + kModelEnv +
                                 ", or --model none for vectors only");
}

Status DataDirOpenError(const std::string& data, const Status& s,
                        const std::string& instead) {
  if (s.message().find("lock file") == std::string::npos)
    return s.WithContext("data " + data);
  // RocksDB holds an fcntl write lock on meta/LOCK; F_GETLK names its owner.
  std::string holder = "another process (a running zerovec serve?)";
  std::string what_to_do = instead;
  const std::string lock_path = data + "/meta/LOCK";
  if (int fd = open(lock_path.c_str(), O_RDONLY | O_CLOEXEC); fd >= 0) {
    struct flock fl = {};
    fl.l_type = F_WRLCK;
    fl.l_whence = SEEK_SET;
    if (fcntl(fd, F_GETLK, &fl) == 0 && fl.l_type != F_UNLCK && fl.l_pid > 0) {
      holder = "process " + std::to_string(fl.l_pid);
      std::ifstream comm("/proc/" + std::to_string(fl.l_pid) + "/cmdline");
      std::string argv0, argv1;
      std::getline(comm, argv0, '\0');
      std::getline(comm, argv1, '\0');
      if (!argv0.empty()) {
        holder += " (" + std::filesystem::path(argv0).filename().string() +
                  (argv1.empty() ? "" : " " + argv1) + ")";
      }
      // `instead` speaks of a server; a build or compact just ends.
      if (argv1 == "build" || argv1 == "compact")
        what_to_do = "wait for it to finish, or stop it first";
    }
    close(fd);
  }
  return FailedPreconditionError("data " + data + " is held by " + holder +
                                 ", which has it open; " + what_to_do);
}

StatusOr<Flags> Flags::Parse(const std::vector<std::string>& args,
                             const std::set<std::string>& with_value,
                             const std::set<std::string>& booleans) {
  Flags flags;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    std::string name;
    if (arg.rfind("--", 0) == 0) {
      name = arg.substr(2);
    } else if (arg.size() >= 2 && arg[0] == '-' && arg[1] != '-') {
      name = arg.substr(1);
    } else {
      return InvalidArgumentError("unexpected argument \"" + arg + "\"");
    }
    std::optional<std::string> value;
    if (auto eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    }
    if (booleans.count(name)) {
      if (value) return InvalidArgumentError("--" + name + " takes no value");
      flags.values_[name] = "true";
    } else if (with_value.count(name)) {
      if (!value) {
        if (i + 1 >= args.size())
          return InvalidArgumentError("--" + name + " needs a value");
        value = args[++i];
      }
      flags.values_[name] = *value;
    } else {
      return InvalidArgumentError("unknown flag \"" + arg + "\"");
    }
  }
  return flags;
}

std::string Flags::Get(const std::string& name,
                       const std::string& fallback) const {
  auto it = values_.find(name);
  return it == values_.end() ? fallback : it->second;
}

StatusOr<std::string> Flags::Require(const std::string& name) const {
  auto it = values_.find(name);
  if (it == values_.end() || it->second.empty()) {
    return InvalidArgumentError("missing required flag --" + name);
  }
  return it->second;
}

StatusOr<int64_t> Flags::GetInt(const std::string& name, int64_t fallback,
                                int64_t min, int64_t max) const {
  auto it = values_.find(name);
  if (it == values_.end()) return fallback;
  const std::string dash = name.size() == 1 ? "-" : "--";
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(it->second.c_str(), &end, 10);
  if (it->second.empty() || *end != '\0' || errno != 0 || v < min || v > max) {
    return InvalidArgumentError(
        dash + name + ": expected an integer in [" + std::to_string(min) +
        ", " + std::to_string(max) + "], got \"" + it->second + "\"");
  }
  return static_cast<int64_t>(v);
}

StatusOr<double> Flags::GetDouble(const std::string& name, double fallback,
                                  double min, double max) const {
  auto it = values_.find(name);
  if (it == values_.end()) return fallback;
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(it->second.c_str(), &end);
  // !(v >= min) also refuses NaN.
  if (it->second.empty() || *end != '\0' || errno != 0 || !(v >= min) ||
      !(v <= max)) {
    std::ostringstream range;
    range << "[" << min << ", " << max << "]";
    return InvalidArgumentError("--" + name + ": expected a number in " +
                                range.str() + ", got \"" + it->second + "\"");
  }
  return v;
}

StatusOr<std::vector<float>> ReadVectorFile(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) return NotFoundError(path.string() + ": cannot open vector file");
  std::stringstream buffer;
  buffer << in.rdbuf();
  std::string text = buffer.str();
  for (char& c : text) {
    if (c == ',' || c == '[' || c == ']') c = ' ';
  }
  std::vector<float> values;
  std::istringstream tokens(text);
  std::string token;
  while (tokens >> token) {
    char* end = nullptr;
    const float v = std::strtof(token.c_str(), &end);
    if (*end != '\0' || !std::isfinite(v)) {
      return FailedPreconditionError(path.string() + ": value " +
                                     std::to_string(values.size()) + " (\"" +
                                     token + "\") is not a finite number");
    }
    values.push_back(v);
  }
  if (values.empty())
    return FailedPreconditionError(path.string() + ": no values");
  return values;
}

StatusOr<std::string> ReadSecretFile(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) return NotFoundError(path.string() + ": cannot open");
  std::stringstream buffer;
  buffer << in.rdbuf();
  std::string s = buffer.str();
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back())))
    s.pop_back();
  if (s.empty()) return FailedPreconditionError(path.string() + ": empty");
  return s;
}

namespace {
std::string OneLine(const std::string& s, size_t max_chars) {
  std::string out;
  for (char c : s) {
    if (out.size() >= max_chars) {
      // Do not cut a UTF-8 sequence in half.
      while (!out.empty() &&
             (static_cast<unsigned char>(out.back()) & 0xC0) == 0x80) {
        out.pop_back();
      }
      if (!out.empty() && (static_cast<unsigned char>(out.back()) & 0x80))
        out.pop_back();
      return out + "...";
    }
    out.push_back(c == '\n' || c == '\r' || c == '\t' ? ' ' : c);
  }
  return out;
}
}  // namespace

StatusOr<index::SearchMode> ParseSearchMode(const std::string& mode) {
  if (mode == "dense") return index::SearchMode::kDense;
  if (mode == "lexical") return index::SearchMode::kLexical;
  if (mode == "hybrid") return index::SearchMode::kHybrid;
  return InvalidArgumentError(
      "--mode: expected dense, lexical or hybrid, got \"" + mode + "\"");
}

StatusOr<index::FusionOptions> ParseFusionFlags(const Flags& flags) {
  index::FusionOptions f;
  ZV_ASSIGN_OR_RETURN(f.rrf_k, flags.GetDouble("rrf-k", f.rrf_k, 1e-6, 1e9));
  ZV_ASSIGN_OR_RETURN(f.dense_weight,
                      flags.GetDouble("dense-weight", f.dense_weight, 0, 1e6));
  ZV_ASSIGN_OR_RETURN(
      f.lexical_weight,
      flags.GetDouble("lexical-weight", f.lexical_weight, 0, 1e6));
  return f;
}

void PrintHits(const std::vector<OutputHit>& hits, bool json,
               std::ostream& out) {
  if (json) {
    nlohmann::json doc = {{"hits", nlohmann::json::array()}};
    for (const auto& h : hits) {
      nlohmann::json hit = {{"id", h.id},
                            {"score", h.score},
                            {"namespace", h.ns},
                            {"text", h.text}};
      if (!h.metadata.empty()) hit["metadata"] = h.metadata;
      if (h.show_ranks) {
        hit["dense_rank"] = h.dense_rank;
        hit["lexical_rank"] = h.lexical_rank;
      }
      doc["hits"].push_back(std::move(hit));
    }
    out << doc.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
        << "\n";
    return;
  }
  size_t id_width = 2, ns_width = 9;
  for (const auto& h : hits) {
    id_width = std::max(id_width, std::min<size_t>(h.id.size(), 40));
    ns_width = std::max(ns_width, std::min<size_t>(h.ns.size(), 20));
  }
  const bool ranks = !hits.empty() && hits[0].show_ranks;
  out << std::left << std::setw(5) << "rank" << std::setw(11) << "score";
  if (ranks) out << std::setw(6) << "dense" << std::setw(5) << "lex";
  out << std::setw(id_width + 2) << "id" << std::setw(ns_width + 2)
      << "namespace"
      << "text\n";
  for (size_t i = 0; i < hits.size(); ++i) {
    const auto& h = hits[i];
    std::ostringstream score;
    score << std::fixed << std::setprecision(4) << h.score;
    out << std::left << std::setw(5) << (i + 1) << std::setw(11) << score.str();
    if (ranks) {
      auto rank = [](uint32_t r) { return r ? std::to_string(r) : "-"; };
      out << std::setw(6) << rank(h.dense_rank) << std::setw(5)
          << rank(h.lexical_rank);
    }
    out << std::setw(id_width + 2) << OneLine(h.id, 40)
        << std::setw(ns_width + 2) << OneLine(h.ns, 20) << OneLine(h.text, 100)
        << "\n";
  }
  if (hits.empty()) out << "(no hits)\n";
}

Progress::Progress(std::string label, bool tty)
    : label_(std::move(label)),
      tty_(tty),
      start_(std::chrono::steady_clock::now()),
      last_print_(start_) {}

std::string Progress::Line(uint64_t rows, double fraction) const {
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_)
          .count();
  const double rate = secs > 0 ? rows / secs : 0;
  fraction = std::clamp(fraction, 0.0, 1.0);
  const int pct = static_cast<int>(100.0 * fraction);
  std::ostringstream line;
  if (tty_) {
    const int width = 30;
    const int filled = static_cast<int>(fraction * width);
    line << label_ << " [" << std::string(filled, '#')
         << std::string(width - filled, '.') << "] ";
  } else {
    line << label_ << ": ";
  }
  line << rows << " rows (" << pct << "%), " << static_cast<int64_t>(rate)
       << " rows/s";
  if (fraction > 0 && fraction < 1) {
    const int64_t eta = static_cast<int64_t>(secs * (1 - fraction) / fraction);
    line << ", ETA " << eta / 60 << "m" << std::setw(2) << std::setfill('0')
         << eta % 60 << "s";
  }
  return line.str();
}

void Progress::Update(uint64_t rows, double fraction) {
  const auto now = std::chrono::steady_clock::now();
  if (tty_) {
    if (now - last_print_ < std::chrono::milliseconds(100)) return;
    std::cerr << "\r" << Line(rows, fraction) << "\x1b[K" << std::flush;
  } else {
    // A line per 10% (at most one a second) or every 5 s.
    const bool step = fraction - last_fraction_ >= 0.1 &&
                      now - last_print_ >= std::chrono::seconds(1);
    if (!step && now - last_print_ < std::chrono::seconds(5)) return;
    std::cerr << Line(rows, fraction) << "\n";
  }
  last_print_ = now;
  last_fraction_ = fraction;
  last_rows_ = rows;
}

void Progress::Finish(uint64_t rows) {
  if (!tty_ && rows == last_rows_ && last_fraction_ >= 1) return;
  std::cerr << (tty_ ? "\r" : "") << Line(rows, 1.0)
            << (tty_ ? "\x1b[K\n" : "\n");
}

Status RpcError(const std::string& server, int code,
                const std::string& message) {
  return FailedPreconditionError(
      server + ": " +
      std::string(StatusCodeName(static_cast<StatusCode>(code))) + ": " +
      message);
}

std::vector<int> DeviceChoice::CudaDevices() const {
  std::vector<int> out;
  for (const embed::EmbedderOptions& o : devices) {
    if (o.device == embed::DevicePreference::kCuda) {
      out.push_back(o.cuda_device);
    }
  }
  return out;
}

StatusOr<DeviceChoice> ParseDeviceFlags(const Flags& flags) {
  DeviceChoice choice;
  const std::string device_flag = flags.Get("device", "auto");
  ZV_ASSIGN_OR_RETURN(const embed::EmbedderOptions one,
                      embed::ParseDevice(device_flag));
  if (!flags.Has("devices")) {
    choice.devices.push_back(one);
    return choice;
  }
  choice.from_devices = true;
  choice.devices_flag = flags.Get("devices");
  ZV_ASSIGN_OR_RETURN(choice.devices, embed::ParseDevices(choice.devices_flag));
  if (flags.Has("device") && one.device != embed::DevicePreference::kAuto) {
    const bool listed =
        std::any_of(choice.devices.begin(), choice.devices.end(),
                    [&](const embed::EmbedderOptions& o) {
                      return o.device == one.device &&
                             (o.device != embed::DevicePreference::kCuda ||
                              o.cuda_device == one.cuda_device);
                    });
    if (!listed) {
      return InvalidArgumentError(
          "--device " + device_flag + " and --devices " + choice.devices_flag +
          " disagree: give --devices alone (it wins over a --device that "
          "names one of its devices)");
    }
  }
  return choice;
}

}  // namespace zv::tools
