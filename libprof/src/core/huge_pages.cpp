#include "core/huge_pages.hpp"

#include <sys/mman.h>

#include <cstdint>
#include <cstdlib>

namespace sonde {

namespace {
constexpr size_t kHuge = size_t(2) << 20;
constexpr size_t kSmallest = size_t(1) << 20;

size_t mapped_size(size_t bytes) { return (bytes + kHuge - 1) & ~(kHuge - 1); }
}  // namespace

void* huge_alloc(size_t bytes) {
  if (bytes < kSmallest) return std::malloc(bytes == 0 ? 1 : bytes);
  size_t size = mapped_size(bytes);
  // One huge page more than asked, so that an aligned start is inside; the ends are returned.
  void* raw = mmap(nullptr, size + kHuge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                   -1, 0);
  if (raw == MAP_FAILED) return nullptr;
  auto start = reinterpret_cast<uintptr_t>(raw);
  uintptr_t aligned = (start + kHuge - 1) & ~uintptr_t(kHuge - 1);
  if (aligned > start) munmap(raw, aligned - start);
  if (uintptr_t end = start + size + kHuge; end > aligned + size)
    munmap(reinterpret_cast<void*>(aligned + size), end - (aligned + size));
  auto* p = reinterpret_cast<void*>(aligned);
  madvise(p, size, MADV_HUGEPAGE);  // a hint: without THP the pages are ordinary ones
  return p;
}

void huge_free(void* p, size_t bytes) {
  if (p == nullptr) return;
  if (bytes < kSmallest) {
    std::free(p);
    return;
  }
  munmap(p, mapped_size(bytes));
}

}  // namespace sonde
