// Memory for the flush's large copies. A first flush of 99,000 call paths copies 9 MB of rows,
// and on the paravirtualised VM of docs/performance.md each first touch of a 4 KB page cost
// about 15 us (33 ms for the copy, more than the copying). Blocks of 1 MB and more are mapped
// in whole, 2 MB-aligned huge pages and offered to transparent huge pages (MADV_HUGEPAGE: the
// kernel's default "madvise" mode backs only such mappings), one fault per 2 MB; smaller ones
// are malloc's. The rounding up wastes less than half of what a block holds.
#pragma once

#include <cstddef>
#include <new>
#include <vector>

namespace sonde {

// nullptr only when malloc fails too.
void* huge_alloc(size_t bytes);
void huge_free(void* p, size_t bytes);

template <class T>
struct HugePageAllocator {
  using value_type = T;
  HugePageAllocator() = default;
  template <class U>
  HugePageAllocator(const HugePageAllocator<U>&) {}  // NOLINT: allocators convert implicitly
  T* allocate(size_t n) {
    void* p = huge_alloc(n * sizeof(T));
    if (p == nullptr) throw std::bad_alloc();
    return static_cast<T*>(p);
  }
  void deallocate(T* p, size_t n) { huge_free(p, n * sizeof(T)); }
  template <class U>
  bool operator==(const HugePageAllocator<U>&) const {
    return true;
  }
};

template <class T>
using HugeVector = std::vector<T, HugePageAllocator<T>>;

}  // namespace sonde
