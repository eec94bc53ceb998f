#include "symbols/find_object.hpp"

#include <dlfcn.h>
#include <elf.h>
#include <unistd.h>

#include <cstdint>

#include "symbols/loader_free.hpp"

namespace sonde {

namespace {

using FindFn = int (*)(void*, dl_find_object*);

// glibc's function by its version, looked up rather than linked, so that the library loads
// where it is absent. Resolved when libsonde loads (kResolved below), never first on a thread
// that must not take the loader's lock.
FindFn native() {
  static const FindFn fn =
      reinterpret_cast<FindFn>(dlvsym(RTLD_DEFAULT, "_dl_find_object", "GLIBC_2.35"));
  return fn;
}
[[maybe_unused]] const bool kResolved = native() != nullptr;

struct Search {
  uintptr_t address;
  dl_find_object* found;
  bool hit;
};

// dl_iterate_phdr calls back under the loader's lock, so the link map list it walks here holds
// still; the callback's dlpi_name is the link map's own l_name.
int match(dl_phdr_info* info, size_t, void* data) {
  auto* s = static_cast<Search*>(data);
  uintptr_t lo = UINTPTR_MAX, hi = 0;
  bool inside = false;
  const void* eh_frame = nullptr;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    uintptr_t start = info->dlpi_addr + ph.p_vaddr;
    if (ph.p_type == PT_LOAD) {
      if (s->address >= start && s->address < start + ph.p_memsz) inside = true;
      lo = start < lo ? start : lo;
      hi = start + ph.p_memsz > hi ? start + ph.p_memsz : hi;
    } else if (ph.p_type == PT_GNU_EH_FRAME) {
      eh_frame = reinterpret_cast<const void*>(start);
    }
  }
  if (!inside) return 0;
  const link_map* map = nullptr;
  for (const link_map* m = _r_debug.r_map; m != nullptr; m = m->l_next) {
    if (m->l_addr == info->dlpi_addr && m->l_name == info->dlpi_name) map = m;
  }
  // As the loader records an object's span: from the page its first segment starts in to the
  // end of its last segment's memory.
  const uintptr_t page = uintptr_t(getpagesize());
  s->found->dlfo_flags = 0;
  s->found->dlfo_map_start = reinterpret_cast<void*>(lo & ~(page - 1));
  s->found->dlfo_map_end = reinterpret_cast<void*>(hi);
  s->found->dlfo_link_map = const_cast<link_map*>(map);
  s->found->dlfo_eh_frame = const_cast<void*>(eh_frame);
  s->hit = map != nullptr;
  return 1;
}

}  // namespace

int find_object_lock_free(const void* address, dl_find_object* found) {
  FindFn fn = native();
  return fn != nullptr ? fn(const_cast<void*>(address), found) : -1;
}

int find_object_walking(const void* address, dl_find_object* found) {
  Search s{reinterpret_cast<uintptr_t>(address), found, false};
  dl_iterate_phdr(match, &s);
  return s.hit ? 0 : -1;
}

int find_object(const void* address, dl_find_object* found) {
  if (FindFn fn = native()) return fn(const_cast<void*>(address), found);
  return loader_free() ? -1 : find_object_walking(address, found);
}

bool find_object_is_lock_free() { return native() != nullptr; }

}  // namespace sonde
