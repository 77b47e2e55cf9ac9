// A collection's lexical index: a Xapian (glass) database of its documents'
// texts, one Xapian document per external id (unique term "Q" + id, replaced
// or deleted by that term), English-stemmed terms, BM25 weighting.
//
// The meta store stays the record: this index is derived state, like the HNSW
// pieces. Each commit stores a stamp (the segment's generation, committed rows
// and tombstones after the write it reflects); a collection that opens with a
// different stamp re-checks every document against the meta store
// (CollectionImpl::ReconcileLexical).
//
// Thread-safety: LexicalWriter is single-threaded (the collection's writer
// lock); LexicalSearcher may be searched from any number of threads.
#ifndef ZEROVEC_INDEX_LEXICAL_INDEX_H_
#define ZEROVEC_INDEX_LEXICAL_INDEX_H_

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace Xapian {
class Database;
class WritableDatabase;
class TermGenerator;
}  // namespace Xapian

namespace zv::index {

// The lexical index's folder inside a collection's directory.
inline constexpr char kLexicalDirName[] = "lexical";

// A stable 64-bit fingerprint of a document text (FNV-1a): what reconcile
// compares to find a Xapian document that holds an older text.
uint64_t TextFingerprint(std::string_view text);

class LexicalWriter {
 public:
  // Opens (creating if needed) the database in `dir`. `sync`: fsync commits.
  static StatusOr<std::unique_ptr<LexicalWriter>> Open(
      const std::filesystem::path& dir, bool sync);
  ~LexicalWriter();

  // Staged until Commit. An empty text removes the id (nothing to match).
  Status Put(const std::string& id, std::string_view text);
  Status Remove(const std::string& id);
  // Makes the staged changes and `stamp` durable and visible to searchers.
  Status Commit(const std::string& stamp);
  // The stamp of the last commit ("" for a new database).
  StatusOr<std::string> Stamp() const;
  uint64_t documents() const;
  // Every document's id and text fingerprint (committed and staged).
  Status ForEach(const std::function<Status(const std::string& id,
                                            uint64_t fingerprint)>& fn) const;

 private:
  LexicalWriter() = default;
  std::unique_ptr<Xapian::WritableDatabase> db_;
  std::unique_ptr<Xapian::TermGenerator> terms_;
  bool sync_ = false;
};

struct LexicalHit {
  std::string id;
  double weight = 0;  // BM25
};

// Read-only searches of a lexical index, from the writer's process or an
// attached reader's. Each search borrows a Xapian handle from a pool (Xapian
// objects are not thread-safe); Refresh() makes every handle reopen to the
// latest commit before its next search.
class LexicalSearcher {
 public:
  static StatusOr<std::unique_ptr<LexicalSearcher>> Open(
      const std::filesystem::path& dir);
  ~LexicalSearcher();

  void Refresh() { epoch_.fetch_add(1, std::memory_order_release); }
  // Up to k best documents for `query` (parsed as free text: stemmed words,
  // OR'ed, BM25), best first, among those `accept` (called with each
  // candidate's id; null: all) lets through.
  StatusOr<std::vector<LexicalHit>> Search(
      const std::string& query, int k,
      const std::function<bool(const std::string& id)>& accept) const;
  StatusOr<uint64_t> documents() const;

 private:
  struct Handle;
  explicit LexicalSearcher(std::filesystem::path dir);
  StatusOr<std::unique_ptr<Handle>> Borrow() const;
  void Return(std::unique_ptr<Handle> h) const;

  std::filesystem::path dir_;
  std::atomic<uint64_t> epoch_{0};
  mutable std::mutex mu_;
  mutable std::vector<std::unique_ptr<Handle>> free_;
};

}  // namespace zv::index

#endif  // ZEROVEC_INDEX_LEXICAL_INDEX_H_
