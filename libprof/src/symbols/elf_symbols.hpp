// Function names from an object's .symtab (local functions included), for naming call sites
// that dladdr cannot: static functions and anonymous namespaces.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace sonde {

class ElfSymbols {
 public:
  // Reads the function symbols of the ELF file at `path`; empty if unreadable or stripped.
  explicit ElfSymbols(const std::string& path);
  // The function containing `address` (a file-relative virtual address), or nullptr.
  const char* function_at(uint64_t address) const;
  bool position_dependent() const { return exec_; }
  bool defines(const char* function) const;

 private:
  struct Function {
    uint64_t start, size;
    uint32_t name;  // offset into names_
  };
  std::vector<Function> functions_;  // sorted by start
  std::string names_;
  bool exec_ = false;
};

}  // namespace sonde
