#include "core/huge_pages.hpp"

#include <sys/mman.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace sonde {

namespace {
constexpr size_t kHuge = size_t(2) << 20;
constexpr size_t kSmallest = size_t(1) << 20;

size_t mapped_size(size_t bytes) { return (bytes + kHuge - 1) & ~(kHuge - 1); }

bool huge_aligned(const void* p) { return (reinterpret_cast<uintptr_t>(p) & (kHuge - 1)) == 0; }

// A malloc'd block handed out where a mapping could not be made: returned 16 or 32 bytes in,
// never on a 2 MB boundary (which is how huge_free tells the two apart), with malloc's pointer
// just before it.
void* fallback_alloc(size_t bytes) {
  auto* raw = static_cast<char*>(std::malloc(bytes + 32));
  if (raw == nullptr) return nullptr;
  char* p = raw + 16;
  if (huge_aligned(p)) p += 16;
  std::memcpy(p - sizeof(void*), &raw, sizeof(void*));
  return p;
}
}  // namespace

void* huge_alloc(size_t bytes) {
  if (bytes < kSmallest) return std::malloc(bytes == 0 ? 1 : bytes);
  size_t size = mapped_size(bytes);
  // One huge page more than asked, so that an aligned start is inside; the ends are returned.
  void* raw =
      mmap(nullptr, size + kHuge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  // The extra 2 MB can be what an address-space limit (ulimit -v) refuses: then as malloc would.
  if (raw == MAP_FAILED) return fallback_alloc(bytes);
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
  if (!huge_aligned(p)) {  // fallback_alloc's
    void* raw;
    std::memcpy(&raw, static_cast<char*>(p) - sizeof(void*), sizeof(void*));
    std::free(raw);
    return;
  }
  munmap(p, mapped_size(bytes));
}

}  // namespace sonde
