#include "symbols/real_symbol.hpp"

#include <dlfcn.h>
#include <limits.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <vector>

#include "sonde/quiet_write.hpp"

namespace sonde {

namespace {

const void* own_base() {
  static const void* base = [] {
    Dl_info info{};
    dladdr(reinterpret_cast<const void*>(&own_base), &info);
    return static_cast<const void*>(info.dli_fbase);
  }();
  return base;
}

int collect_object(struct dl_phdr_info* info, size_t, void* data) {
  auto* names = static_cast<std::vector<std::string>*>(data);
  if (info->dlpi_name != nullptr && info->dlpi_name[0] != '\0') names->emplace_back(info->dlpi_name);
  return 0;
}

}  // namespace

bool is_own_address(const void* address) {
  Dl_info info{};
  return dladdr(address, &info) != 0 && info.dli_fbase == own_base();
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
  int n = snprintf(line, sizeof line,
                   "sonde: the program called %s, but no loaded library defines it; aborting\n",
                   name);
  if (n > 0)
    quiet_write(2, std::string_view(line, size_t(n) < sizeof line ? size_t(n) : sizeof line - 1));
  abort();
}

std::string object_path_of(const void* address) {
  Dl_info info{};
  if (dladdr(address, &info) == 0 || info.dli_fname == nullptr) return "";
  char resolved[PATH_MAX];
  if (realpath(info.dli_fname, resolved) != nullptr) return resolved;
  return info.dli_fname;
}

void* symbol_beside(const void* address, const char* name) {
  Dl_info info{};
  if (address == nullptr || dladdr(address, &info) == 0 || info.dli_fname == nullptr)
    return nullptr;
  void* handle = dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
  if (handle == nullptr) return nullptr;
  void* found = dlsym(handle, name);
  dlclose(handle);  // RTLD_NOLOAD took a reference; the object stays loaded by its owner
  return found;
}

}  // namespace sonde
