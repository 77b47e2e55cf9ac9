#include "index/lexical_index.h"

#include <xapian.h>

#include <cstring>

namespace zv::index {
namespace {

constexpr Xapian::valueno kFingerprintSlot = 0;
// Xapian refuses terms over ~245 bytes; ids may have up to 512.
constexpr size_t kMaxPlainIdTerm = 200;
// Okapi BM25 with the usual k1 1.2, b 0.75 (Xapian's defaults are 1, 0.5);
// k2 0 (no query length correction), k3 1 (query term frequency matters).
constexpr double kK1 = 1.2, kK2 = 0, kK3 = 1, kB = 0.75, kMinNormLen = 0.5;
// A borrowed handle that finds its revision overwritten reopens and retries.
constexpr int kSearchAttempts = 3;

Status FromXapian(const Xapian::Error& e, std::string_view what) {
  // Xapian::Error is not polymorphic: its type is a name.
  const std::string type = e.get_type();
  StatusCode code = StatusCode::kInternal;
  if (type == "DatabaseCorruptError") {
    code = StatusCode::kDataLoss;
  } else if (type == "DatabaseLockError") {
    code = StatusCode::kUnavailable;
  } else if (type == "DatabaseOpeningError" ||
             type == "DatabaseNotFoundError") {
    code = StatusCode::kNotFound;
  }
  return Status(code, "lexical index " + std::string(what) + ": " +
                          e.get_type() + ": " + e.get_msg());
}

std::string Hex64(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx",
                static_cast<unsigned long long>(v));
  return buf;
}

// The unique term of an id: "Q" + id, or for a long id its first bytes and
// its fingerprint (the id itself is the document's data).
std::string IdTerm(const std::string& id) {
  if (id.size() <= kMaxPlainIdTerm) return "Q" + id;
  return "Q\x01" + id.substr(0, 64) + Hex64(TextFingerprint(id));
}

std::string EncodeFingerprint(uint64_t v) {
  std::string s(8, '\0');
  std::memcpy(s.data(), &v, 8);
  return s;
}

uint64_t DecodeFingerprint(const std::string& s) {
  uint64_t v = 0;
  if (s.size() == 8) std::memcpy(&v, s.data(), 8);
  return v;
}

}  // namespace

uint64_t TextFingerprint(std::string_view text) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

// --- LexicalWriter

LexicalWriter::~LexicalWriter() = default;

StatusOr<std::unique_ptr<LexicalWriter>> LexicalWriter::Open(
    const std::filesystem::path& dir, bool sync) {
  std::unique_ptr<LexicalWriter> w(new LexicalWriter());
  w->sync_ = sync;
  try {
    // Unsynced commits unless the collection syncs: like the segment, a
    // crash may lose the last commits, and reconcile re-indexes them.
    const int flags =
        Xapian::DB_CREATE_OR_OPEN | (sync ? 0 : Xapian::DB_NO_SYNC);
    w->db_ = std::make_unique<Xapian::WritableDatabase>(dir.string(), flags);
    w->terms_ = std::make_unique<Xapian::TermGenerator>();
    w->terms_->set_stemmer(Xapian::Stem("en"));
    w->terms_->set_stemming_strategy(Xapian::TermGenerator::STEM_SOME);
  } catch (const Xapian::Error& e) {
    return FromXapian(e, "open " + dir.string());
  }
  return w;
}

Status LexicalWriter::Put(const std::string& id, std::string_view text) {
  if (text.empty()) return Remove(id);
  try {
    Xapian::Document doc;
    terms_->set_document(doc);
    // No positions: searches are bags of words (a hyphenated or quoted query
    // becomes an AND of its words), and positions would double the postings.
    terms_->index_text_without_positions(std::string(text));
    const std::string term = IdTerm(id);
    doc.add_boolean_term(term);
    doc.set_data(id);
    doc.add_value(kFingerprintSlot, EncodeFingerprint(TextFingerprint(text)));
    db_->replace_document(term, doc);
  } catch (const Xapian::Error& e) {
    return FromXapian(e, "put '" + id + "'");
  }
  return OkStatus();
}

Status LexicalWriter::Remove(const std::string& id) {
  try {
    db_->delete_document(IdTerm(id));
  } catch (const Xapian::Error& e) {
    return FromXapian(e, "remove '" + id + "'");
  }
  return OkStatus();
}

Status LexicalWriter::Commit(const std::string& stamp) {
  try {
    db_->set_metadata("zerovec.stamp", stamp);
    db_->commit();
  } catch (const Xapian::Error& e) {
    return FromXapian(e, "commit");
  }
  return OkStatus();
}

StatusOr<std::string> LexicalWriter::Stamp() const {
  try {
    return db_->get_metadata("zerovec.stamp");
  } catch (const Xapian::Error& e) {
    return FromXapian(e, "read stamp");
  }
}

uint64_t LexicalWriter::documents() const { return db_->get_doccount(); }

Status LexicalWriter::ForEach(
    const std::function<Status(const std::string& id, uint64_t fingerprint)>&
        fn) const {
  try {
    for (auto it = db_->postlist_begin(""); it != db_->postlist_end(""); ++it) {
      const Xapian::Document doc = db_->get_document(*it);
      ZV_RETURN_IF_ERROR(fn(
          doc.get_data(), DecodeFingerprint(doc.get_value(kFingerprintSlot))));
    }
  } catch (const Xapian::Error& e) {
    return FromXapian(e, "scan");
  }
  return OkStatus();
}

// --- LexicalSearcher

struct LexicalSearcher::Handle {
  Xapian::Database db;
  uint64_t epoch = 0;
};

LexicalSearcher::LexicalSearcher(std::filesystem::path dir)
    : dir_(std::move(dir)) {}
LexicalSearcher::~LexicalSearcher() = default;

StatusOr<std::unique_ptr<LexicalSearcher>> LexicalSearcher::Open(
    const std::filesystem::path& dir) {
  std::unique_ptr<LexicalSearcher> s(new LexicalSearcher(dir));
  ZV_ASSIGN_OR_RETURN(auto h, s->Borrow());  // fails now if it cannot open
  s->Return(std::move(h));
  return s;
}

StatusOr<std::unique_ptr<LexicalSearcher::Handle>> LexicalSearcher::Borrow()
    const {
  std::unique_ptr<Handle> h;
  {
    std::lock_guard<std::mutex> l(mu_);
    if (!free_.empty()) {
      h = std::move(free_.back());
      free_.pop_back();
    }
  }
  const uint64_t epoch = epoch_.load(std::memory_order_acquire);
  try {
    if (!h) {
      h = std::make_unique<Handle>();
      h->db = Xapian::Database(dir_.string());
      h->epoch = epoch;
    } else if (h->epoch != epoch) {
      h->db.reopen();
      h->epoch = epoch;
    }
  } catch (const Xapian::Error& e) {
    return FromXapian(e, "open " + dir_.string());
  }
  return h;
}

void LexicalSearcher::Return(std::unique_ptr<Handle> h) const {
  std::lock_guard<std::mutex> l(mu_);
  free_.push_back(std::move(h));
}

namespace {

class AcceptDecider : public Xapian::MatchDecider {
 public:
  explicit AcceptDecider(const std::function<bool(const std::string&)>& accept)
      : accept_(accept) {}
  bool operator()(const Xapian::Document& doc) const override {
    return accept_(doc.get_data());
  }

 private:
  const std::function<bool(const std::string&)>& accept_;
};

std::vector<LexicalHit> RunQuery(
    Xapian::Database& db, const std::string& text, int k,
    const std::function<bool(const std::string&)>& accept) {
  Xapian::QueryParser parser;
  parser.set_stemmer(Xapian::Stem("en"));
  parser.set_stemming_strategy(Xapian::QueryParser::STEM_SOME);
  parser.set_default_op(Xapian::Query::OP_OR);
  // No flags: user text is words, not query syntax (no AND/NOT/wildcards).
  const Xapian::Query query = parser.parse_query(text, 0);
  Xapian::Enquire enquire(db);
  enquire.set_query(query);
  enquire.set_weighting_scheme(
      Xapian::BM25Weight(kK1, kK2, kK3, kB, kMinNormLen));
  AcceptDecider decider(accept);
  const Xapian::MSet mset =
      enquire.get_mset(0, k, 0, nullptr, accept ? &decider : nullptr);
  std::vector<LexicalHit> hits;
  for (auto it = mset.begin(); it != mset.end(); ++it) {
    hits.push_back({it.get_document().get_data(), it.get_weight()});
  }
  return hits;
}

}  // namespace

StatusOr<std::vector<LexicalHit>> LexicalSearcher::Search(
    const std::string& query, int k,
    const std::function<bool(const std::string& id)>& accept) const {
  ZV_ASSIGN_OR_RETURN(auto h, Borrow());
  for (int attempt = 1;; ++attempt) {
    try {
      auto hits = RunQuery(h->db, query, k, accept);
      Return(std::move(h));
      return hits;
    } catch (const Xapian::DatabaseModifiedError& e) {
      // The writer committed twice since this handle's revision.
      if (attempt == kSearchAttempts) return FromXapian(e, "search");
      try {
        h->db.reopen();
      } catch (const Xapian::Error& e2) {
        return FromXapian(e2, "reopen");
      }
    } catch (const Xapian::QueryParserError& e) {
      Return(std::move(h));
      return InvalidArgumentError("query text: " + e.get_msg());
    } catch (const Xapian::Error& e) {
      return FromXapian(e, "search");
    }
  }
}

StatusOr<uint64_t> LexicalSearcher::documents() const {
  ZV_ASSIGN_OR_RETURN(auto h, Borrow());
  const uint64_t n = h->db.get_doccount();
  Return(std::move(h));
  return n;
}

}  // namespace zv::index
