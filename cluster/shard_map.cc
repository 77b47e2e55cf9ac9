#include "cluster/shard_map.h"

#include <algorithm>
#include <nlohmann/json.hpp>

namespace zv::cluster {

using nlohmann::json;

std::string NodeKey(int64_t id) {
  return std::string(kNodesPrefix) + std::to_string(id);
}

std::string CollectionKey(const std::string& name) {
  return std::string(kCollectionsPrefix) + name;
}

std::string ToJson(const NodeInfo& node) {
  return json{{"id", node.id}, {"address", node.address}}.dump();
}

StatusOr<NodeInfo> NodeFromJson(const std::string& text) {
  try {
    const json j = json::parse(text);
    return NodeInfo{j.at("id").get<int64_t>(),
                    j.at("address").get<std::string>()};
  } catch (const std::exception& e) {
    return DataLossError(std::string("node record: ") + e.what());
  }
}

namespace {
bool AnyJoiner(const ShardMap& m) {
  for (const auto& j : m.joining)
    if (!j.empty()) return true;
  return false;
}
}  // namespace

const std::vector<Joiner>& ShardMap::Joining(int shard) const {
  static const std::vector<Joiner> kNone;
  return shard < static_cast<int>(joining.size()) ? joining[shard] : kNone;
}

const Joiner* ShardMap::FindJoiner(int shard, int64_t node) const {
  for (const Joiner& j : Joining(shard))
    if (j.node == node) return &j;
  return nullptr;
}

bool ShardMap::HasReplica(int shard, int64_t node) const {
  const auto& r = replicas[shard];
  return std::find(r.begin(), r.end(), node) != r.end();
}

std::string ToJson(const ShardMap& m) {
  const int format = std::max(m.format, AnyJoiner(m) ? 2 : 1);
  json j{{"format", format},
         {"name", m.name},
         {"epoch", m.epoch},
         {"dim", m.dim},
         {"metric", m.metric},
         {"index", m.index},
         {"default_ttl_ms", m.default_ttl_ms},
         {"lexical", m.lexical},
         {"replication_factor", m.replication_factor},
         {"write_quorum", m.write_quorum},
         {"replicas", m.replicas}};
  if (format >= 2) {
    json joining = json::array();
    for (int s = 0; s < m.shards(); ++s) {
      json list = json::array();
      for (const Joiner& x : m.Joining(s))
        list.push_back(
            {{"node", x.node}, {"since", x.since}, {"lease", x.lease}});
      joining.push_back(std::move(list));
    }
    j["joining"] = std::move(joining);
  }
  return j.dump();
}

StatusOr<ShardMap> ShardMapFromJson(const std::string& text) {
  ShardMap m;
  try {
    const json j = json::parse(text);
    m.format = j.at("format").get<int>();
    m.name = j.at("name").get<std::string>();
    m.epoch = j.at("epoch").get<int64_t>();
    if (m.format > kShardMapFormat) {
      return FailedPreconditionError(
          "shard map of collection \"" + m.name + "\" (epoch " +
          std::to_string(m.epoch) + ") has format " + std::to_string(m.format) +
          ", this node reads up to " + std::to_string(kShardMapFormat) +
          ": upgrade this node before it serves the collection");
    }
    m.dim = j.at("dim").get<uint32_t>();
    m.metric = j.at("metric").get<int>();
    m.index = j.at("index").get<std::string>();
    m.default_ttl_ms = j.at("default_ttl_ms").get<int64_t>();
    m.lexical = j.at("lexical").get<bool>();
    m.replication_factor = j.at("replication_factor").get<int>();
    m.write_quorum = j.at("write_quorum").get<int>();
    m.replicas = j.at("replicas").get<std::vector<std::vector<int64_t>>>();
    m.joining.resize(m.replicas.size());
    if (auto it = j.find("joining"); it != j.end()) {
      for (size_t s = 0; s < it->size() && s < m.joining.size(); ++s) {
        for (const json& x : (*it)[s])
          m.joining[s].push_back({x.at("node").get<int64_t>(),
                                  x.at("since").get<int64_t>(),
                                  x.at("lease").get<int64_t>()});
      }
    }
  } catch (const std::exception& e) {
    return DataLossError(std::string("shard map: ") + e.what());
  }
  return m;
}

int ShardOf(const std::string& id, int shards) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : id) h = (h ^ c) * 1099511628211ull;
  return static_cast<int>(h % static_cast<uint64_t>(shards));
}

StatusOr<std::vector<std::vector<int64_t>>> AssignReplicas(
    std::vector<int64_t> node_ids, int shards, int replication_factor) {
  std::sort(node_ids.begin(), node_ids.end());
  const int n = static_cast<int>(node_ids.size());
  if (n < replication_factor) {
    return FailedPreconditionError(
        "replication_factor " + std::to_string(replication_factor) +
        " needs as many live nodes, the cluster has " + std::to_string(n));
  }
  std::vector<std::vector<int64_t>> out(shards);
  for (int s = 0; s < shards; ++s) {
    for (int r = 0; r < replication_factor; ++r)
      out[s].push_back(node_ids[(s + r) % n]);
  }
  return out;
}

std::optional<int64_t> PickJoiner(const ShardMap& map, int shard,
                                  const std::set<int64_t>& live) {
  const size_t want = static_cast<size_t>(map.replication_factor);
  if (map.replicas[shard].empty() ||
      map.replicas[shard].size() + map.Joining(shard).size() >= want)
    return std::nullopt;
  std::map<int64_t, int> load;
  for (int s = 0; s < map.shards(); ++s) {
    for (int64_t id : map.replicas[s]) ++load[id];
    for (const Joiner& j : map.Joining(s)) ++load[j.node];
  }
  std::optional<int64_t> best;
  for (int64_t id : live) {  // ascending: ties go to the lowest id
    if (map.HasReplica(shard, id) || map.FindJoiner(shard, id)) continue;
    if (!best || load[id] < load[*best]) best = id;
  }
  return best;
}

std::string LocalShardName(const std::string& name, int shard) {
  return name + "--shard" + std::to_string(shard);
}

bool ParseLocalShardName(const std::string& local, std::string* name,
                         int* shard) {
  const size_t at = local.rfind("--shard");
  if (at == std::string::npos || at == 0) return false;
  const std::string digits = local.substr(at + 7);
  if (digits.empty() || digits.size() > 4 ||
      !std::all_of(digits.begin(), digits.end(), ::isdigit))
    return false;
  *name = local.substr(0, at);
  *shard = std::stoi(digits);
  return true;
}

}  // namespace zv::cluster
