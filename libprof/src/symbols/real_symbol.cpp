#include "symbols/real_symbol.hpp"

#include <dlfcn.h>
#include <limits.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <vector>

#include "sonde/quiet_write.hpp"
#include "symbols/loader_free.hpp"

namespace sonde {

namespace {

// The loader's record of the object an address lies in: _dl_find_object reads it from a table
// of mapped ranges, where dladdr also walks the object's whole symbol table for the nearest
// name (libc's 3,000 symbols for each of the 22 functions a process's start resolves: 0.3 ms).
const void* object_of(const void* address) {
  dl_find_object found{};
  return _dl_find_object(const_cast<void*>(address), &found) == 0 ? found.dlfo_link_map : nullptr;
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
  Dl_info info{};
  if (loader_free()) return nullptr;
  if (address == nullptr || dladdr(address, &info) == 0 || info.dli_fname == nullptr)
    return nullptr;
  void* handle = dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
  if (handle == nullptr) return nullptr;
  void* found = dlsym(handle, name);
  dlclose(handle);  // RTLD_NOLOAD took a reference; the object stays loaded by its owner
  return found;
}

}  // namespace sonde
