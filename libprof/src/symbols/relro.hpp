// Whether the loader has finished relocating an object, told by its RELRO pages: the loader
// makes them read-only as the last step of relocating it. rebind.cpp asks this where glibc has no
// _dl_find_object (before 2.35), which knows an object only once it is relocated.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "symbols/dynamic_section.hpp"

namespace sonde {

// The pages the loader makes read-only once it has relocated the object: [start, end) as glibc's
// _dl_protect_relro computes it (whole pages; empty where the object has no PT_GNU_RELRO, or
// one shorter than the rest of its first page).
std::pair<uintptr_t, uintptr_t> relro_of(const DynamicSection& d);

// The mappings without write permission, from /proc/self/maps, read at the first question only:
// open and read, no allocation by the loader and no dl* call, so it may be asked inside
// dl_iterate_phdr's callback.
class ReadOnlyMappings {
 public:
  bool hold(uintptr_t address);

 private:
  std::vector<std::pair<uintptr_t, uintptr_t>> ranges_;
  bool read_ = false;
};

}  // namespace sonde
