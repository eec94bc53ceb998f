#include "symbols/elf_symbols.hpp"

#include <elf.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

namespace sonde {

ElfSymbols::ElfSymbols(const std::string& path) {
  std::string build_id;
  if (!read(path, &build_id) && build_id.size() > 2) {
    // A stripped library's .symtab is in its separate debug file (Debian's -dbg packages),
    // found by build id, as perf and gdb find it: libm's __cos_fma was libm.so.6+0x70aeb.
    std::string debug =
        "/usr/lib/debug/.build-id/" + build_id.substr(0, 2) + "/" + build_id.substr(2) + ".debug";
    ElfSymbols separate(debug, nullptr);
    if (!separate.functions_.empty()) {
      functions_ = std::move(separate.functions_);
      names_ = std::move(separate.names_);
    }
  }
}

ElfSymbols::ElfSymbols(const std::string& path, std::string* build_id) { read(path, build_id); }

bool ElfSymbols::read(const std::string& path, std::string* build_id) {
  bool symtab = false;
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  struct stat st;
  if (fstat(fd, &st) != 0 || size_t(st.st_size) < sizeof(Elf64_Ehdr)) {
    close(fd);
    return false;
  }
  size_t size = size_t(st.st_size);
  void* map = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  if (map == MAP_FAILED) return false;
  auto* base = static_cast<const unsigned char*>(map);
  auto* eh = reinterpret_cast<const Elf64_Ehdr*>(base);
  // Every range is checked against what remains of the file, never by a sum that can wrap:
  // the loader reads only program headers, so a library with a lying section table loads fine.
  auto fits = [size](uint64_t offset, uint64_t length) {
    return offset <= size && length <= size - offset;
  };
  bool ok = std::memcmp(eh->e_ident, ELFMAG, SELFMAG) == 0 && eh->e_ident[EI_CLASS] == ELFCLASS64 &&
            eh->e_shnum <= (size - std::min<uint64_t>(eh->e_shoff, size)) / sizeof(Elf64_Shdr) &&
            fits(eh->e_shoff, uint64_t(eh->e_shnum) * sizeof(Elf64_Shdr));
  if (ok) {
    exec_ = eh->e_type == ET_EXEC;
    auto* sections = reinterpret_cast<const Elf64_Shdr*>(base + eh->e_shoff);
    // .symtab when present (it has the local functions), else .dynsym.
    const Elf64_Shdr* table = nullptr;
    for (int want : {SHT_SYMTAB, SHT_DYNSYM}) {
      for (int i = 0; i < eh->e_shnum && table == nullptr; ++i) {
        if (sections[i].sh_type == uint32_t(want)) table = &sections[i];
      }
      if (table != nullptr) break;
    }
    symtab = table != nullptr && table->sh_type == SHT_SYMTAB;
    for (int i = 0; i < eh->e_shnum && build_id != nullptr; ++i) {
      const Elf64_Shdr& note = sections[i];
      if (note.sh_type != SHT_NOTE || !fits(note.sh_offset, note.sh_size) ||
          note.sh_size < sizeof(Elf64_Nhdr))
        continue;
      auto* nh = reinterpret_cast<const Elf64_Nhdr*>(base + note.sh_offset);
      uint64_t desc = sizeof(Elf64_Nhdr) + ((uint64_t(nh->n_namesz) + 3) & ~uint64_t(3));
      if (nh->n_type != NT_GNU_BUILD_ID || nh->n_namesz != 4 || nh->n_descsz > 64 ||
          desc + nh->n_descsz > note.sh_size)
        continue;
      static const char kHex[] = "0123456789abcdef";
      for (uint32_t b = 0; b < nh->n_descsz; ++b) {
        unsigned char byte = base[note.sh_offset + desc + b];
        build_id->push_back(kHex[byte >> 4]);
        build_id->push_back(kHex[byte & 15]);
      }
      break;
    }
    if (table != nullptr && table->sh_link < eh->e_shnum &&
        fits(table->sh_offset, table->sh_size) &&
        fits(sections[table->sh_link].sh_offset, sections[table->sh_link].sh_size)) {
      const Elf64_Shdr& strtab = sections[table->sh_link];
      auto* syms = reinterpret_cast<const Elf64_Sym*>(base + table->sh_offset);
      size_t count = table->sh_size / sizeof(Elf64_Sym);
      for (size_t i = 0; i < count; ++i) {
        const Elf64_Sym& s = syms[i];
        if (ELF64_ST_TYPE(s.st_info) != STT_FUNC || s.st_value == 0 || s.st_name == 0) continue;
        if (s.st_name >= strtab.sh_size) continue;
        const char* name = reinterpret_cast<const char*>(base + strtab.sh_offset + s.st_name);
        functions_.push_back(Function{s.st_value, s.st_size, uint32_t(names_.size())});
        names_.append(name, strnlen(name, strtab.sh_size - s.st_name));
        names_.push_back('\0');
      }
    }
  }
  munmap(map, size);
  std::sort(functions_.begin(), functions_.end(),
            [](const Function& a, const Function& b) { return a.start < b.start; });
  return symtab;
}

const char* ElfSymbols::function_at(uint64_t address) const {
  auto it = std::upper_bound(functions_.begin(), functions_.end(), address,
                             [](uint64_t a, const Function& f) { return a < f.start; });
  if (it == functions_.begin()) return nullptr;
  --it;
  if (address >= it->start + std::max<uint64_t>(it->size, 1)) return nullptr;
  return names_.c_str() + it->name;
}

}  // namespace sonde

namespace sonde {

bool ElfSymbols::defines(const char* function) const {
  for (const Function& f : functions_) {
    if (std::strcmp(names_.c_str() + f.name, function) == 0) return true;
  }
  return false;
}

}  // namespace sonde
