// An append-only array written by one thread and read by another. Elements never move: storage
// grows by whole chunks, and the size is published with release order after the element is
// initialised, so a reader that loads the size with acquire order sees complete elements.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <new>

namespace sonde {

template <class T, uint32_t kChunkBits = 10, uint32_t kMaxChunks = 4096>
class ChunkedArray {
 public:
  static constexpr uint32_t kChunkSize = 1u << kChunkBits;
  static constexpr uint32_t kCapacity = kChunkSize * kMaxChunks;
  static constexpr uint32_t kFull = UINT32_MAX;

  ChunkedArray() = default;
  ~ChunkedArray() {
    if (!chunks_) return;
    for (uint32_t c = 0; c < kMaxChunks; ++c) delete[] chunks_[c].load(std::memory_order_relaxed);
  }
  ChunkedArray(const ChunkedArray&) = delete;
  ChunkedArray& operator=(const ChunkedArray&) = delete;

  T& operator[](uint32_t i) {
    return chunks_[i >> kChunkBits].load(std::memory_order_relaxed)[i & (kChunkSize - 1)];
  }
  const T& operator[](uint32_t i) const {
    return chunks_[i >> kChunkBits].load(std::memory_order_relaxed)[i & (kChunkSize - 1)];
  }

  // Owner: the slot for the next element, default-constructed; kFull when at capacity.
  // Allocates only when a chunk is full, so steady state allocates nothing.
  uint32_t reserve() {
    uint32_t i = size_.load(std::memory_order_relaxed);
    if (i == kCapacity) return kFull;
    uint32_t c = i >> kChunkBits;
    // The table too is made on first use: most threads never record shapes or lines. Readers
    // see it through the release store of the size, like the elements.
    // Without memory (the host at its `ulimit -v`) the array is full: the caller counts what it
    // could not keep, as at capacity. A std::bad_alloc here would cross the host's C frames
    // from inside a wrapper, and end the process.
    if (!chunks_) {
      chunks_.reset(new (std::nothrow) std::atomic<T*>[kMaxChunks]());
      if (!chunks_) return kFull;
    }
    if (chunks_[c].load(std::memory_order_relaxed) == nullptr) {
      T* chunk = new (std::nothrow) T[kChunkSize]();
      if (chunk == nullptr) return kFull;
      chunks_[c].store(chunk, std::memory_order_release);
    }
    return i;
  }
  // Owner, with no reader left (a fork child before its flusher starts): empty again. The
  // first chunk stays, its elements made anew in place, so that the first reserve() after
  // this one cannot fail for memory (a thread's root node is taken there). The others are let
  // go, not freed: they are the parent's pages, shared until written, and a free writes the
  // allocator's header and links into each (a page copy per chunk: 400 for a tree of 100,000
  // nodes, about as many as the rest of a Python child's start).
  void reset() {
    uint32_t used = size_.load(std::memory_order_relaxed);
    size_.store(0, std::memory_order_relaxed);
    if (!chunks_) return;
    // Only the slots and elements that were used, and the next (reserved, maybe written, not
    // published): the rest are untouched pages.
    for (uint32_t c = 1; c <= std::min(used >> kChunkBits, kMaxChunks - 1); ++c)
      chunks_[c].store(nullptr, std::memory_order_relaxed);
    if (T* first = chunks_[0].load(std::memory_order_relaxed)) {
      for (uint32_t i = 0; i < std::min(used + 1, kChunkSize); ++i) {
        std::destroy_at(&first[i]);
        std::construct_at(&first[i]);
      }
    }
  }
  // Owner: makes element `i` (the reserved one) visible to readers.
  void publish(uint32_t i) { size_.store(i + 1, std::memory_order_release); }

  uint32_t size_acquire() const { return size_.load(std::memory_order_acquire); }
  uint32_t size_owner() const { return size_.load(std::memory_order_relaxed); }

 private:
  std::unique_ptr<std::atomic<T*>[]> chunks_;
  std::atomic<uint32_t> size_{0};
};

// Single-writer counter: readers on other threads load it atomically; the owner's update is a
// plain load and store, with no locked instruction on the hot path.
inline void bump(std::atomic<uint64_t>& a, uint64_t v) {
  a.store(a.load(std::memory_order_relaxed) + v, std::memory_order_relaxed);
}

}  // namespace sonde
