// What a checkpoint is (pooling, sizes): shared by the public embedder.h and
// the internal checkpoint loader, so internals need not include the public
// header above them.
#ifndef ZEROVEC_EMBED_MODEL_INFO_H_
#define ZEROVEC_EMBED_MODEL_INFO_H_

#include <string>

namespace zv::embed {

enum class Pooling { kMean, kCls };

struct ModelInfo {
  std::string name;    // folder name
  int dim = 0;         // output vector size (hidden size)
  int max_length = 0;  // tokens incl. [CLS]/[SEP]; longer inputs are truncated
  int vocab_size = 0;
  int num_layers = 0;
  Pooling pooling = Pooling::kMean;
  bool normalize = true;
};

}  // namespace zv::embed

#endif  // ZEROVEC_EMBED_MODEL_INFO_H_
