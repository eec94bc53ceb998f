#include "symbolize.hpp"

#include <cxxabi.h>
#include <dlfcn.h>
#include <fmt/format.h>

#include <cstdlib>
#include <cstring>

namespace sonde {

namespace {

std::string demangle(const char* name) {
  int status = 0;
  char* out = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  if (status != 0 || out == nullptr) return name;
  std::string s(out);
  std::free(out);
  return s;
}

std::string base_name(const char* path) {
  if (path == nullptr) return "?";
  const char* slash = std::strrchr(path, '/');
  return slash ? slash + 1 : path;
}

}  // namespace

std::string symbolize(const void* address) {
  if (address == nullptr) return "?";
  // The return address points after the call; step back into the calling instruction.
  auto ip = reinterpret_cast<uintptr_t>(address) - 1;
  Dl_info info{};
  dladdr(reinterpret_cast<void*>(ip), &info);
  std::string object = base_name(info.dli_fname);
  // dladdr sees exported symbols only: programs linked with -rdynamic (as the examples are)
  // get function names, others the object and offset (addr2line turns those into lines).
  if (info.dli_sname != nullptr) return fmt::format("{} [{}]", demangle(info.dli_sname), object);
  auto base = reinterpret_cast<uintptr_t>(info.dli_fbase);
  return fmt::format("{}+{:#x}", object, ip - base);
}

}  // namespace sonde
