// Function names from an object's .symtab (local functions included), for naming call sites
// that dladdr cannot: static functions and anonymous namespaces.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace sonde {

class ElfSymbols {
 public:
  // Reads the function symbols of the ELF file at `path` (of its separate debug file when it is
  // stripped and one is installed); empty if unreadable or stripped.
  explicit ElfSymbols(const std::string& path);
  // The function containing `address` (a file-relative virtual address), or nullptr.
  const char* function_at(uint64_t address) const;
  bool position_dependent() const { return exec_; }
  bool defines(const char* function) const;
  bool empty() const { return functions_.empty(); }

 private:
  ElfSymbols(const std::string& path, std::string* build_id);
  // False when the file has no .symtab; `build_id` (when given) gets its GNU build id in hex.
  bool read(const std::string& path, std::string* build_id);
  struct Function {
    uint64_t start, size;
    uint32_t name;  // offset into names_
  };
  std::vector<Function> functions_;  // sorted by start
  std::string names_;
  bool exec_ = false;
};

}  // namespace sonde
