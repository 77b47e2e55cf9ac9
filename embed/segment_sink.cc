#include "embed/segment_sink.h"

#include <algorithm>

namespace zv::embed {

SegmentSink::~SegmentSink() {
  for (void* data : registered_) embedder_.UnregisterOutputMemory(data);
}

Status SegmentSink::RegisterNewExtents() {
  for (const shm::Writer::MappedRange& range : writer_.MappedRanges()) {
    if (std::find(registered_.begin(), registered_.end(), range.data) !=
        registered_.end()) {
      continue;
    }
    ZV_RETURN_IF_ERROR(embedder_.RegisterOutputMemory(range.data, range.bytes));
    registered_.push_back(range.data);
  }
  return OkStatus();
}

Status SegmentSink::Embed(std::span<const std::string_view> texts,
                          uint64_t first_row) {
  if (writer_.info().dim != static_cast<uint32_t>(embedder_.info().dim)) {
    return InvalidArgumentError(
        "segment " + writer_.dir().string() + " has dim " +
        std::to_string(writer_.info().dim) + ", model " +
        embedder_.info().name + " produces " +
        std::to_string(embedder_.info().dim));
  }
  if (first_row < writer_.committed() ||
      first_row + texts.size() > writer_.reserved()) {
    return OutOfRangeError("segment " + writer_.dir().string() + ": rows [" +
                           std::to_string(first_row) + ", " +
                           std::to_string(first_row + texts.size()) +
                           ") are not reserved and uncommitted");
  }
  ZV_RETURN_IF_ERROR(RegisterNewExtents());
  std::vector<float*> rows(texts.size());
  for (size_t i = 0; i < texts.size(); ++i)
    rows[i] = writer_.MutableRow(first_row + i);
  return embedder_.EmbedInto(texts, rows);
}

Status EmbedIntoSegment(Embedder& embedder, shm::Writer& writer,
                        std::span<const std::string_view> texts,
                        uint64_t first_row) {
  SegmentSink sink(embedder, writer);
  return sink.Embed(texts, first_row);
}

}  // namespace zv::embed
