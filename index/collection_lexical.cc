// The collection's lexical index (issue 17): opened beside the segment,
// updated as step 5 of the write protocol, reconciled with the meta store on
// open (collection_impl.h).
#include <unordered_map>

#include "index/collection_impl.h"

namespace zv::index {

std::string CollectionImpl::LexicalStamp(const Generation& g) const {
  // Within a generation rows and tombstones only grow, and every write adds
  // to one of them: an equal stamp means no write since the lexical commit.
  return std::to_string(g.number) + ":" +
         std::to_string(g.writer->committed()) + ":" +
         std::to_string(g.writer->TombstoneCount());
}

Status CollectionImpl::OpenLexical(const Generation& g) {
  if (!meta_.options.lexical) return OkStatus();
  const auto dir = root_ / kLexicalDirName;
  auto writer = LexicalWriter::Open(dir, meta_.options.sync);
  if (!writer.ok()) {
    return writer.status().WithContext("collection '" + meta_.name + "'");
  }
  lexical_writer_ = std::move(writer).value();
  ZV_RETURN_IF_ERROR(ReconcileLexical(g));
  ZV_ASSIGN_OR_RETURN(lexical_, LexicalSearcher::Open(dir));
  lexical_documents_ = lexical_writer_->documents();
  return OkStatus();
}

Status CollectionImpl::ReconcileLexical(const Generation& g) {
  const std::string stamp = LexicalStamp(g);
  ZV_ASSIGN_OR_RETURN(const std::string stored, lexical_writer_->Stamp());
  if (stored == stamp) return OkStatus();
  // Live rows with text: id -> (row, fingerprint of the text).
  const shm::Writer& w = *g.writer;
  std::unordered_map<std::string, std::pair<uint64_t, uint64_t>> live;
  for (uint64_t row = 0; row < w.committed(); ++row) {
    if (w.IsTombstoned(row) || !g.attrs.present(row)) continue;
    ZV_ASSIGN_OR_RETURN(auto rec,
                        store_->GetRow(meta_.name, g.number, row, true));
    if (!rec || rec->text.empty()) continue;
    live[rec->id] = {row, TextFingerprint(rec->text)};
  }
  // Documents of ids that are gone, or that hold another text than the live
  // row's, go; live texts the index lacks (or held stale) are put.
  std::vector<std::string> stale;
  ZV_RETURN_IF_ERROR(lexical_writer_->ForEach(
      [&](const std::string& id, uint64_t fingerprint) {
        auto it = live.find(id);
        if (it == live.end()) {
          stale.push_back(id);
        } else if (it->second.second == fingerprint) {
          live.erase(it);  // in step
        }
        return OkStatus();
      }));
  for (const std::string& id : stale) {
    ZV_RETURN_IF_ERROR(lexical_writer_->Remove(id));
  }
  for (const auto& [id, entry] : live) {
    ZV_ASSIGN_OR_RETURN(
        auto rec, store_->GetRow(meta_.name, g.number, entry.first, true));
    if (rec) ZV_RETURN_IF_ERROR(lexical_writer_->Put(id, rec->text));
  }
  lexical_repairs_ = stale.size() + live.size();
  return lexical_writer_->Commit(stamp);
}

void CollectionImpl::UpdateLexical(std::span<const Record> records,
                                   std::span<const std::string> deleted_ids) {
  if (!lexical_writer_) return;
  Status s;
  for (const Record& r : records) {
    if (s.ok()) s = lexical_writer_->Put(r.id, r.text);  // "" removes
  }
  for (const std::string& id : deleted_ids) {
    if (s.ok()) s = lexical_writer_->Remove(id);
  }
  if (!s.ok()) lexical_stale_ = true;
  // Once out of step, no stamp may claim otherwise: the next open re-checks.
  s = lexical_writer_->Commit(lexical_stale_ ? "" : LexicalStamp(*g_));
  if (!s.ok()) lexical_stale_ = true;
  if (lexical_) lexical_->Refresh();
  lexical_documents_ = lexical_writer_->documents();
}

}  // namespace zv::index
