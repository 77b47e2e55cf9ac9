// Embedding straight into a shm segment's rows: the one place embed/ touches
// shm/.
#ifndef ZEROVEC_EMBED_SEGMENT_SINK_H_
#define ZEROVEC_EMBED_SEGMENT_SINK_H_

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "embed/embedder.h"
#include "shm/segment.h"

namespace zv::embed {

// Keeps a segment's extent mappings registered with the embedder (pinned for
// the GPU) while it lives; registers extents the writer adds later on the next
// Embed. Must not outlive the Writer or the Embedder.
class SegmentSink {
 public:
  SegmentSink(Embedder& embedder, shm::Writer& writer)
      : embedder_(embedder), writer_(writer) {}
  ~SegmentSink();
  SegmentSink(const SegmentSink&) = delete;
  SegmentSink& operator=(const SegmentSink&) = delete;

  // Embeds texts[i] into row first_row + i, in place. The rows must already be
  // reserved (Writer::Reserve); the caller commits them afterwards.
  Status Embed(std::span<const std::string_view> texts, uint64_t first_row);

 private:
  Status RegisterNewExtents();

  Embedder& embedder_;
  shm::Writer& writer_;
  std::vector<void*> registered_;
};

// One-shot form of SegmentSink::Embed (registers and unregisters around the
// call).
Status EmbedIntoSegment(Embedder& embedder, shm::Writer& writer,
                        std::span<const std::string_view> texts,
                        uint64_t first_row);

}  // namespace zv::embed

#endif  // ZEROVEC_EMBED_SEGMENT_SINK_H_
