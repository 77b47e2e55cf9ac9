// zerovec: build, serve, query, attach and compact ZeroVec collections.
#include <algorithm>
#include <iostream>
#include <string>
#include <vector>

#include "embed/embedder.h"
#include "tools/commands.h"
#include "tools/version.h"

namespace {

struct Command {
  const char* name;
  int (*run)(const std::vector<std::string>& args);
  const char* usage;  // flags and what it does, indented under the name
};

constexpr Command kCommands[] = {
    {"build", zv::tools::RunBuild,
     R"(--data DIR --collection NAME --input FILE [--model DIR|none]
          [--index flat|hnsw|ivfpq] [--device auto|cpu|cuda|cuda:N]
          [--devices all|cuda:0,cuda:1,...|cpu]
          [--format auto|jsonl|text|npy|fvecs] [--ids FILE] [--batch N]
          [--inflight N] [--threads N] [--chunk-long-texts] [--lexical]
          [--hnsw-seal one-graph|pieces]
          Loads a corpus in one pass: JSONL ({"id","text","namespace",
          "metadata","timestamp_ms"}, or "vector": [..] stored as given),
          plain text (a document a line), or .npy / .fvecs vectors (ids from
          --ids, one a line, else row numbers). Re-running skips stored ids; a
          bad line stops it with file:line, keeping what came before.
          --batch: rows a pipeline chunk (default 16384 on a GPU, 1024 on CPU);
          --inflight: chunks in flight at once (default 16; bounds memory).
          --threads: cores the CPU encoder uses (default 0: all of them).
          --devices: one encoder per device listed (all: every GPU), chunks
          spread over them by queue depth, each writing its rows straight into
          the segment; wins over --device (which must then be auto or one of
          them). A device listed twice is an error.
          Texts longer than the model's window (max_length tokens, 128 for
          zerovec-mini) are embedded from their start only; the closing lines
          say how many. --chunk-long-texts (off by default) stores such a text
          as overlapping window-sized chunks instead, cut at whitespace, ~1/8
          of the window shared: rows ID#0, ID#1, ... with the text's metadata
          plus source_id (ID) and chunk (0, 1, ...).
          --group NAME: share the data dir with a Unix group (files 0640).
          --lexical: a new collection also keeps a lexical (Xapian BM25,
          English-stemmed) index of the texts, for query/attach --mode
          lexical|hybrid. Off by default: it slows ingest and takes disk, and
          vector-only corpora have no text. Fixed at creation.
          --hnsw-seal (HNSW collections): one-graph (default) builds one
          graph over every row once, at the end, on every core (nothing is
          built during the load): the fastest build and several times faster
          to search than pieces. pieces builds graph pieces in the background
          during the load, so the index grows with it (attached readers
          search it meanwhile), and builds the tail into one more at the end.
)"},
    {"serve", zv::tools::RunServe,
     R"([--data DIR] [--listen HOST:PORT] [--model DIR|none]
          [--device auto|cpu|cuda|cuda:N] [--devices all|cuda:0,cuda:1,...]
          [--auth-token-file F] [--port-file F]
          [--max-batch N] [--max-k N] [--max-text-bytes N]
          [--max-message-bytes N] [--max-concurrent-requests N]
          [--compact-tombstones F] [--compact-min-rows N]
          [--shutdown-grace-s N] [--group NAME] [--threads N]
          [--gpu-memory BYTES|auto] [--gpu-device N] [--gpu-batch-window-us N]
          [--gpu-text-queries auto|device|host]
          [--sweep-interval-ms N]
          [--cluster etcd://H:P[,H:P...] --node-id N [--advertise-host H]
           [--lease-ttl-s N] [--shard-timeout-ms N] [--allow-partial-results]]
          Serves the data directory over gRPC until SIGTERM / SIGINT.
          --cluster: join the cluster coordinated by that etcd as node N
          (README, "Cluster"): collections created with shards > 0 are
          sharded and replicated over the nodes, and any node serves them.
          --sweep-interval-ms N (default 1000, 0 = off): how often expired
          items (expires_at_ms, a collection's default_ttl_ms) are deleted;
          they are hidden from searches and Get from their expiry either way,
          and compaction (--compact-tombstones) reclaims their space.
          --threads: cores the CPU encoder uses (default 0: all of them).
          --compact-tombstones F: compact a collection in the background once
          a fraction F (0..1) of its rows is tombstoned (deleted or replaced)
          and it has at least --compact-min-rows rows (default 1000); 0 (the
          default) disables.
          --gpu-memory BYTES|auto: search collections on the GPU (exact) from
          mirrors of their rows in device memory, as many as fit BYTES (e.g.
          40G; auto: 80% of the free memory); the rest stay on the CPU, each
          with a log line. Without CUDA or the device, BYTES refuses to start
          and auto logs that it is off. --gpu-batch-window-us N (default 500,
          0 = off): concurrent searches of one collection with the same k and
          filter wait up to N us to run as one GPU batch.
          --gpu-text-queries auto|device|host: text queries on a mirrored
          collection are embedded into GPU memory and searched from there, one
          by one (device), or embedded to the host and searched like vector
          queries, coalesced (host); auto (default): device when coalescing is
          off, else host (coalescing serves more).
          --devices all|cuda:0,cuda:1,...: one encoder per GPU listed (all:
          every GPU), embedding requests spread over them by queue depth; with
          --gpu-memory each collection's mirror is split over the same GPUs
          (row stripes, BYTES per GPU), searched on all at once and merged on
          the host. Wins over --device / --gpu-device (which must then name
          one of its devices).
)"},
    {"query", zv::tools::RunQuery,
     R"(--server ADDR --collection NAME (--text T | --vector-file F) [-k N]
          [--namespace NS] [--ef-search N] [--json] [--auth-token-file F]
          [--timeout-s N] [--mode dense|lexical|hybrid] [--rrf-k F]
          [--dense-weight F] [--lexical-weight F]
          [--recency-half-life-ms N [--recency-weight W]]
          Searches through a server. --mode lexical (BM25 over the texts) and
          hybrid (dense and lexical fused by reciprocal rank: score = dense-
          weight/(rrf-k + dense rank) + lexical-weight/(rrf-k + lexical rank),
          defaults 1, 1, 60) need --text and a collection built with
          --lexical; their hits show both ranks.
          --recency-half-life-ms N (dense mode): time-aware ranking; the best
          candidates by similarity are re-scored by 0.5^(age / N) (age from
          the item's timestamp_ms): similarity x that, or with
          --recency-weight W > 0 similarity + W x that.
)"},
    {"attach", zv::tools::RunAttach,
     R"(--data DIR --collection NAME (--text T | --vector-file F) [-k N]
          [--namespace NS] [--json] [--model DIR] [--device auto|cpu|cuda[:N]]
          [--quiet] [--mode dense|lexical|hybrid] [--rrf-k F]
          [--dense-weight F] [--lexical-weight F]
          [--recency-half-life-ms N [--recency-weight W]]
          Searches the segment a server writes, from this process (no gRPC).
          --mode and --recency-* as for query; lexical needs no model.
          Expired items are hidden by the same clock rule as the server's.
)"},
    {"cluster", zv::tools::RunCluster,
     R"(status --cluster etcd://H:P[,H:P...]
          Prints the cluster's live nodes and every sharded collection's
          shard map (epoch, shards, replicas, which replicas are down) as
          etcd holds them.
)"},
    {"compact", zv::tools::RunCompact,
     R"(--server ADDR --collection NAME [--auth-token-file F] [--timeout-s N]
  compact --data DIR --collection NAME
          Rewrites the collection without its tombstoned rows as a new
          generation: through a server (searches keep answering), or offline
          on a data directory no server holds.
)"},
};

constexpr char kFooter[] = R"(
--device auto (default): CUDA when this build has it and a GPU is present, else
the CPU; cuda / cuda:N fail clearly where there is none. The model: --model DIR,
else $ZEROVEC_MODEL, else the bundled zerovec-mini beside the program (a bundle's
share/zerovec/models, Bazel runfiles) or ./models; none found is an error, and
--model none (vectors only) must be asked for.
zerovec <command> --help (or -h) prints that command's usage.
zerovec --version (or zerovec version) prints the version.

exit codes: 0 ok, 2 usage error, 1 other error
)";

void PrintUsage(const Command& c, std::ostream& out) {
  out << "usage: zerovec " << c.name << " " << c.usage;
}

void PrintAllUsage(std::ostream& out) {
  out << "usage: zerovec <command> [flags]\n\ncommands:\n";
  for (const Command& c : kCommands) {
    std::string name = c.name;
    name.resize(8, ' ');
    out << "  " << name << c.usage;
  }
  out << kFooter;
}

// "--help" / "-h" anywhere asks for help (a flag value that is literally
// "-h" can be passed as --flag=-h).
bool WantsHelp(const std::vector<std::string>& args) {
  return std::any_of(args.begin(), args.end(), [](const std::string& a) {
    return a == "--help" || a == "-h";
  });
}

}  // namespace

int main(int argc, char** argv) {
  zv::embed::UseFastBlasKernels(argv);
  if (argc < 2) {
    PrintAllUsage(std::cerr);
    return 2;
  }
  const std::string command = argv[1];
  const std::vector<std::string> args(argv + 2, argv + argc);
  if (command == "--version" || command == "version") {
    std::cout << "zerovec " << zv::tools::kVersion << "\n";
    return 0;
  }
  if (command == "help" || command == "--help" || command == "-h") {
    for (const Command& c : kCommands) {
      if (!args.empty() && args[0] == c.name) {
        PrintUsage(c, std::cout);
        return 0;
      }
    }
    PrintAllUsage(std::cout);
    return 0;
  }
  for (const Command& c : kCommands) {
    if (command != c.name) continue;
    if (WantsHelp(args)) {
      PrintUsage(c, std::cout);
      return 0;
    }
    return c.run(args);
  }
  std::cerr << "zerovec: unknown command \"" << command
            << "\" (try zerovec help)\n";
  return 2;
}
