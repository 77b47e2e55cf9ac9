// zerovec: build, serve, query and attach ZeroVec collections.
#include <iostream>
#include <string>
#include <vector>

#include "tools/commands.h"

namespace {

constexpr char kUsage[] = R"(usage: zerovec <command> [flags]

commands:
  build   --data DIR --collection NAME --input FILE [--model DIR|none]
          [--index flat|hnsw|ivfpq] [--device auto|cpu|cuda|cuda:N]
          [--format auto|jsonl|text|npy|fvecs] [--ids FILE] [--batch N]
          Loads a corpus in one pass: JSONL ({"id","text","namespace",
          "metadata","timestamp_ms"}, or "vector": [..] stored as given),
          plain text (a document a line), or .npy / .fvecs vectors (ids from
          --ids, one a line, else row numbers). Re-running skips stored ids; a
          bad line stops it with file:line, keeping what came before.
          --batch: rows a pipeline chunk (default 16384 on a GPU, 1024 on CPU);
          --inflight: chunks in flight at once (default 16; bounds memory).
          --group NAME (build, serve): share the data dir with a Unix group.
  serve   [--data DIR] [--listen HOST:PORT] [--model DIR|none]
          [--device auto|cpu|cuda|cuda:N] [--auth-token-file F] [--port-file F]
          [--max-batch N] [--max-k N] [--max-text-bytes N]
          [--max-message-bytes N] [--max-concurrent-requests N]
  query   --server ADDR --collection NAME (--text T | --vector-file F) [-k N]
          [--namespace NS] [--ef-search N] [--json] [--auth-token-file F]
  attach  --data DIR --collection NAME (--text T | --vector-file F) [-k N]
          [--namespace NS] [--json] [--model DIR] [--device auto|cpu|cuda[:N]]
          [--quiet]

--device auto (default): CUDA when this build has it and a GPU is present, else
the CPU; cuda / cuda:N fail clearly where there is none. The model defaults to
models/zerovec-mini here or beside the program in a bundle.

exit codes: 0 ok, 2 usage error, 1 other error
)";

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << kUsage;
    return 2;
  }
  const std::string command = argv[1];
  const std::vector<std::string> args(argv + 2, argv + argc);
  if (command == "help" || command == "--help" || command == "-h") {
    std::cout << kUsage;
    return 0;
  }
  if (command == "build") return zv::tools::RunBuild(args);
  if (command == "serve") return zv::tools::RunServe(args);
  if (command == "query") return zv::tools::RunQuery(args);
  if (command == "attach") return zv::tools::RunAttach(args);
  std::cerr << "zerovec: unknown command \"" << command
            << "\" (try zerovec help)\n";
  return 2;
}
