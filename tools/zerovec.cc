// zerovec: build, serve, query and attach ZeroVec collections.
#include <iostream>
#include <string>
#include <vector>

#include "tools/commands.h"

namespace {

constexpr char kUsage[] =
    "usage: zerovec <command> [flags]\n"
    "\n"
    "commands:\n"
    "  build   --data DIR --collection NAME --input FILE [--model DIR|none]\n"
    "          [--index flat|hnsw|ivfpq] [--batch N] [--format "
    "auto|jsonl|text]\n"
    "          (a JSONL line's \"vector\": [..] is stored as given, not "
    "embedded;\n"
    "          --model none when every line has one)\n"
    "  serve   [--data DIR] [--listen HOST:PORT] [--model DIR|none]\n"
    "          [--auth-token-file F] [--port-file F] [--max-batch N] [--max-k "
    "N]\n"
    "          [--max-text-bytes N] [--max-message-bytes N] "
    "[--max-concurrent-requests N]\n"
    "  query   --server ADDR --collection NAME (--text T | --vector-file F) "
    "[-k N]\n"
    "          [--namespace NS] [--ef-search N] [--json] [--auth-token-file "
    "F]\n"
    "  attach  --data DIR --collection NAME (--text T | --vector-file F) [-k "
    "N]\n"
    "          [--namespace NS] [--json] [--model DIR]\n"
    "\n"
    "exit codes: 0 ok, 2 usage error, 1 other error\n";

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
