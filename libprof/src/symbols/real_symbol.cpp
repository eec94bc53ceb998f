#include "symbols/real_symbol.hpp"

#include <dlfcn.h>
#include <limits.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <mutex>
#include <new>
#include <vector>

#include "sonde/quiet_write.hpp"
#include "symbols/find_object.hpp"
#include "symbols/loader_free.hpp"

namespace sonde {

namespace {

// The loader's record of the object an address lies in: _dl_find_object reads it from a table
// of mapped ranges (find_object.hpp), where dladdr also walks the object's whole symbol table for
// the nearest name (libc's 3,000 symbols for each of the 22 functions a process's start resolves:
// 0.3 ms).
const void* object_of(const void* address) {
  dl_find_object found{};
  return find_object(address, &found) == 0 ? found.dlfo_link_map : nullptr;
}

const void* own_object() {
  static const void* own = object_of(reinterpret_cast<const void*>(&own_object));
  return own;
}

int collect_object(struct dl_phdr_info* info, size_t, void* data) {
  auto* names = static_cast<std::vector<std::string>*>(data);
  if (info->dlpi_name != nullptr && info->dlpi_name[0] != '\0')
    names->emplace_back(info->dlpi_name);
  return 0;
}

}  // namespace

bool is_own_address(const void* address) {
  const void* object = object_of(address);
  return object != nullptr && object == own_object();
}

void* find_real_symbol(const char* name) {
  void* fn = dlsym(RTLD_NEXT, name);
  if (fn != nullptr && !is_own_address(fn)) return fn;
  // Names first, dlopen after: dl_iterate_phdr holds the loader's lock while it calls back.
  std::vector<std::string> objects;
  dl_iterate_phdr(collect_object, &objects);
  for (const std::string& object : objects) {
    void* handle = dlopen(object.c_str(), RTLD_LAZY | RTLD_NOLOAD);
    if (handle == nullptr) continue;
    fn = dlsym(handle, name);
    dlclose(handle);  // RTLD_NOLOAD took a reference; the object stays loaded by its owner
    if (fn != nullptr && !is_own_address(fn)) return fn;
  }
  return nullptr;
}

void* find_real_symbol_for(const char* name, const void* site, uintptr_t* lo, uintptr_t* span,
                           bool* global) {
  dl_find_object found{};
  bool known = site != nullptr && find_object(site, &found) == 0;
  *lo = known ? reinterpret_cast<uintptr_t>(found.dlfo_map_start) : 0;
  *span = known ? reinterpret_cast<uintptr_t>(found.dlfo_map_end) - *lo : 0;
  *global = false;
  // The global scope comes first in every object's lookup.
  void* fn = dlsym(RTLD_NEXT, name);
  if (fn != nullptr && !is_own_address(fn)) {
    *global = true;
    return fn;
  }
  // Then the object's own dependencies, as its handle searches them.
  fn = known ? symbol_beside(site, name) : nullptr;
  if (fn != nullptr && !is_own_address(fn)) return fn;
  return find_real_symbol(name);
}

void* RealSymbol::get_slow(const void* site) {
  auto at = reinterpret_cast<uintptr_t>(site);
  auto in = [at](const Caller& c) -> void* {
    void* f = c.fn.load(std::memory_order_acquire);
    return f != nullptr && at - c.lo.load(std::memory_order_relaxed) <
                               c.span.load(std::memory_order_relaxed)
               ? f
               : nullptr;
  };
  if (Others* o = others.load(std::memory_order_acquire)) {
    size_t n = std::min(o->used.load(std::memory_order_acquire), Others::kSize);
    for (size_t i = 0; i < n; ++i)
      if (void* f = in(o->at[i])) return f;
  }
  uintptr_t lo = 0, span = 0;
  bool global = false;
  void* f = find_real_symbol_for(name, site, &lo, &span, &global);
  if (f == nullptr) missing_real_symbol(name);  // the host called it: it must exist
  // Publishing is rare (once per calling object): one lock for every symbol.
  static std::mutex publishing;
  std::lock_guard lock(publishing);
  if (void* g = fn.load(std::memory_order_relaxed)) return g;  // a racer found the global one
  if (first.fn.load(std::memory_order_relaxed) == nullptr) {
    // The global scope's definition is every object's, now and later, unless an object already
    // bound within its own; a site in no object (generated code) is told apart by nothing.
    if (global || span == 0) {
      fn.store(f, std::memory_order_release);
      return f;
    }
    first.lo.store(lo, std::memory_order_relaxed);
    first.span.store(span, std::memory_order_relaxed);
    first.fn.store(f, std::memory_order_release);
    return f;
  }
  if (span == 0 || first.lo.load(std::memory_order_relaxed) == lo) return f;
  Others* o = others.load(std::memory_order_relaxed);
  if (o == nullptr) {
    o = new (std::nothrow) Others;  // kept for the process's life
    if (o == nullptr) return f;     // looked up each time
    others.store(o, std::memory_order_release);
  }
  size_t i = o->used.load(std::memory_order_relaxed);
  for (size_t j = 0; j < std::min(i, Others::kSize); ++j)
    if (o->at[j].lo.load(std::memory_order_relaxed) == lo) return f;  // a racer's
  if (i < Others::kSize) {
    o->at[i].lo.store(lo, std::memory_order_relaxed);
    o->at[i].span.store(span, std::memory_order_relaxed);
    o->at[i].fn.store(f, std::memory_order_release);
    o->used.store(i + 1, std::memory_order_release);
  }
  return f;
}

void missing_real_symbol(const char* name) {
  // The host itself called this function, so there is no result sonde could return instead.
  char line[256];
  int n =
      snprintf(line, sizeof line,
               "sonde: the program called %s, but no loaded library defines it; aborting\n", name);
  if (n > 0)
    quiet_write(2, std::string_view(line, size_t(n) < sizeof line ? size_t(n) : sizeof line - 1));
  abort();
}

std::string object_path_of(const void* address) {
  Dl_info info{};
  if (loader_free()) {  // the link map's name, without the loader's lock
    const auto* map = static_cast<const link_map*>(object_of(address));
    info.dli_fname = map != nullptr ? map->l_name : nullptr;
    if (info.dli_fname == nullptr || info.dli_fname[0] == '\0') return "";  // the executable
  } else if (dladdr(address, &info) == 0 || info.dli_fname == nullptr) {
    return "";
  }
  char resolved[PATH_MAX];
  if (realpath(info.dli_fname, resolved) != nullptr) return resolved;
  return info.dli_fname;
}

void* symbol_beside(const void* address, const char* name) {
  if (loader_free() || address == nullptr) return nullptr;
  // The object's link map, from the loader's table of mapped ranges (object_of); the
  // executable's name is '' there, and its handle is dlopen's of nullptr.
  const auto* map = static_cast<const link_map*>(object_of(address));
  if (map == nullptr) return nullptr;
  const char* file = map->l_name != nullptr && map->l_name[0] != '\0' ? map->l_name : nullptr;
  void* handle = dlopen(file, RTLD_LAZY | RTLD_NOLOAD);
  if (handle == nullptr) return nullptr;
  void* found = dlsym(handle, name);
  dlclose(handle);  // RTLD_NOLOAD took a reference; the object stays loaded by its owner
  return found;
}

}  // namespace sonde
