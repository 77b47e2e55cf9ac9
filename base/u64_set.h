// A set of non-zero-probability 64-bit keys (hashes), open addressing with
// linear probing: 16 bytes a key at most, no allocation per insert. Used to
// notice repeated ids in bulk loads of millions of rows.
#ifndef ZEROVEC_BASE_U64_SET_H_
#define ZEROVEC_BASE_U64_SET_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace zv {

class U64Set {
 public:
  // False when `key` was there already. Key 0 shares a slot with key 1 (0
  // marks an empty slot): callers store hashes, where that costs nothing.
  bool Insert(uint64_t key) {
    if (key == 0) key = 1;
    if ((size_ + 1) * 2 > slots_.size()) Grow();
    const size_t mask = slots_.size() - 1;
    // Fibonacci hashing spreads keys that are not already well mixed.
    for (size_t i = (key * 0x9E3779B97F4A7C15ull) >> shift_;;
         i = (i + 1) & mask) {
      if (slots_[i] == key) return false;
      if (slots_[i] == 0) {
        slots_[i] = key;
        ++size_;
        return true;
      }
    }
  }
  size_t size() const { return size_; }

 private:
  void Grow() {
    std::vector<uint64_t> old = std::move(slots_);
    size_t capacity = std::max<size_t>(1024, old.size() * 2);
    slots_.assign(capacity, 0);
    shift_ = 64;
    for (size_t c = capacity; c > 1; c >>= 1) --shift_;
    size_ = 0;
    for (uint64_t key : old) {
      if (key != 0) Insert(key);
    }
  }

  std::vector<uint64_t> slots_;
  int shift_ = 64;
  size_t size_ = 0;
};

}  // namespace zv

#endif  // ZEROVEC_BASE_U64_SET_H_
