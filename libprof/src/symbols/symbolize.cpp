#include "symbols/symbolize.hpp"

#include <cxxabi.h>
#include <dlfcn.h>
#include <errno.h>
#include <fmt/format.h>
#include <link.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>

#include "symbols/elf_symbols.hpp"
#include "symbols/find_object.hpp"
#include "symbols/loader_free.hpp"

namespace sonde {

namespace {

// Without the parameter list: call sites are read by people, and the object disambiguates.
std::string without_parameters(std::string s) {
  if (s.empty() || s.back() != ')') return s;
  int depth = 0;
  for (size_t i = s.size(); i-- > 0;) {
    if (s[i] == ')') ++depth;
    if (s[i] == '(' && --depth == 0) return i > 0 ? s.substr(0, i) : s;
  }
  return s;
}

std::string demangle(const char* name) {
  int status = 0;
  char* out = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  if (status != 0 || out == nullptr) return name;
  std::string s(out);
  std::free(out);
  return without_parameters(std::move(s));
}

std::string base_name(const char* path) {
  if (path == nullptr) return "?";
  const char* slash = std::strrchr(path, '/');
  return slash ? slash + 1 : path;
}

// dladdr names the main program as argv[0] (or ""), which may not be a path from here.
std::string object_file(const char* fname) {
  if (fname == nullptr || fname[0] == '\0' || std::strchr(fname, '/') == nullptr) {
    return "/proc/self/exe";
  }
  return fname;
}

}  // namespace

std::string symbolize(const void* address) {
  if (address == nullptr) return "?";
  // The return address points after the call; step back into the calling instruction.
  auto ip = reinterpret_cast<uintptr_t>(address) - 1;
  // The object first, without dladdr: dladdr also looks for the nearest exported symbol, a
  // scan of the whole .dynsym (libtorch_cpu's is large), which the sampler's thousands of
  // addresses paid at every flush (torch_cnn: 315 ms of _dl_addr in perf at the exit flush).
  dl_find_object found{};
  const char* fname = nullptr;
  if (find_object(reinterpret_cast<void*>(ip), &found) == 0 && found.dlfo_link_map != nullptr)
    fname = found.dlfo_link_map->l_name;
  // A name without a '/' other than the program's own ("") is no file (the vDSO): dladdr's.
  if (fname != nullptr && (fname[0] == '\0' || std::strchr(fname, '/') != nullptr)) {
    const link_map* map = found.dlfo_link_map;
    std::string object = base_name(fname != nullptr && fname[0] != '\0' ? fname : nullptr);
    if (object == "?") object = base_name(program_invocation_name);
    // Under the store lock. Never destroyed: a flush may run while exit handlers destroy
    // function-local statics (a destroyed map here corrupted the heap of programs at exit).
    static auto* cache = new std::map<std::string, std::unique_ptr<ElfSymbols>>;
    std::string file = object_file(fname);
    auto& symbols = (*cache)[file];
    if (!symbols) symbols = std::make_unique<ElfSymbols>(file);
    uint64_t relative = symbols->position_dependent() ? ip : ip - map->l_addr;
    if (const char* fn = symbols->function_at(relative)) {
      return fmt::format("{} [{}]", demangle(fn), object);
    }
    // dladdr reads the same .dynsym: nothing more to find there.
    if (!symbols->empty()) return fmt::format("{}+{:#x}", object, ip - map->l_addr);
  }
  // The object's own symbol table names local functions too; dladdr knows exported ones only,
  // but also objects that cannot be read from their file (the vDSO).
  if (loader_free()) return fmt::format("{:#x}", ip);
  Dl_info info{};
  dladdr(reinterpret_cast<void*>(ip), &info);
  std::string object = base_name(info.dli_fname);
  if (info.dli_sname != nullptr) return fmt::format("{} [{}]", demangle(info.dli_sname), object);
  auto base = reinterpret_cast<uintptr_t>(info.dli_fbase);
  return fmt::format("{}+{:#x}", object, ip - base);
}

}  // namespace sonde
