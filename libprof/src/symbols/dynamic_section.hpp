// A loaded object's dynamic section, read from memory (<link.h>, <elf.h>): its symbol and string
// tables, its relocation tables and its hash table, checked to lie inside the object's own
// mapped segments, so that an odd object is refused instead of read wrongly.
#pragma once

#include <link.h>

#include <cstddef>
#include <cstdint>

namespace sonde {

// The ELF structures of this machine's word size, named so that clang-format sees types.
using ElfAddr = ElfW(Addr);
using ElfDyn = ElfW(Dyn);
using ElfPhdr = ElfW(Phdr);
using ElfRela = ElfW(Rela);
using ElfSym = ElfW(Sym);

struct DynamicSection {
  ElfAddr base = 0;                 // the load bias (dl_phdr_info's dlpi_addr)
  const ElfDyn* dynamic = nullptr;  // what the loader calls l_ld: one per loaded object
  const ElfSym* symtab = nullptr;
  size_t symtab_room = 0;  // entries between symtab and the end of its segment
  const char* strtab = nullptr;
  size_t strsz = 0;
  const ElfRela* rela = nullptr;  // DT_RELA: GLOB_DAT and the relative relocations
  size_t rela_count = 0;
  size_t relative_count = 0;        // DT_RELACOUNT: relative ones first, which name no symbol
  const ElfRela* jmprel = nullptr;  // DT_JMPREL: the PLT's JUMP_SLOT relocations
  size_t jmprel_count = 0;
  const uint32_t* gnu_hash = nullptr;
  const uint32_t* sysv_hash = nullptr;
  const ElfPhdr* phdr = nullptr;
  int phnum = 0;

  // True when [address, address + bytes) lies in one of the object's loaded segments.
  bool inside(const void* address, size_t bytes) const;
  // A symbol's name, or nullptr when its offset lies past the string table.
  const char* name_of(const ElfSym& sym) const;
  // How many entries the symbol table has (from the hash table); 0 if unknown.
  size_t symbol_count() const;
  // The object's definition of `name` (any version), through its hash table; nullptr if none.
  const ElfSym* defined(const char* name) const;
};

// Reads the object `info` describes; nullptr `why` when it was read, else a reason: no dynamic
// section, REL instead of RELA relocations, a table outside the object.
const char* read_dynamic_section(const dl_phdr_info& info, DynamicSection& out);

// The object's dynamic section address as the loader's link_map holds it (l_ld); nullptr if none.
const ElfDyn* dynamic_of(const dl_phdr_info& info);

}  // namespace sonde
