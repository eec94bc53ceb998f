#include "symbols/dynamic_section.hpp"

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

namespace sonde {
namespace {

struct Found {
  std::string want;  // a substring of the object's path; "" for the main program
  dl_phdr_info info{};
  bool found = false;
};

int find_object(dl_phdr_info* info, size_t, void* data) {
  auto* f = static_cast<Found*>(data);
  std::string name = info->dlpi_name != nullptr ? info->dlpi_name : "";
  if (f->found || (f->want.empty() ? !name.empty() : name.find(f->want) == std::string::npos))
    return 0;
  f->info = *info;
  f->found = true;
  return 1;
}

dl_phdr_info loaded(const std::string& want) {
  Found f{want};
  dl_iterate_phdr(find_object, &f);
  EXPECT_TRUE(f.found) << want;
  return f.info;
}

TEST(DynamicSection, FindsLibcsDefinitionsThroughItsHashTable) {
  DynamicSection libc;
  ASSERT_EQ(read_dynamic_section(loaded("libc.so"), libc), nullptr);
  const ElfSym* exit = libc.defined("_exit");
  ASSERT_NE(exit, nullptr);
  EXPECT_EQ(reinterpret_cast<void*>(libc.base + exit->st_value), dlsym(RTLD_DEFAULT, "_exit"));
  EXPECT_EQ(libc.defined("sonde_no_such_function"), nullptr);
  EXPECT_GT(libc.symbol_count(), 1000u);  // glibc exports a few thousand
}

// The slot the loader filled for a function this program calls in libc: the relocation read
// from memory names it, and the slot holds libc's definition.
TEST(DynamicSection, ReadsThisProgramsRelocationsAndTheirSlots) {
  ASSERT_NE(dlsym(RTLD_DEFAULT, "dl_iterate_phdr"), nullptr);
  DynamicSection self;
  ASSERT_EQ(read_dynamic_section(loaded(""), self), nullptr);
  void* libc = dlsym(RTLD_DEFAULT, "dl_iterate_phdr");
  int slots = 0;
  auto scan = [&](const ElfRela* table, size_t count) {
    for (size_t i = 0; i < count; ++i) {
      size_t index = ELF64_R_SYM(table[i].r_info);
      if (index == 0 || index >= self.symtab_room) continue;
      const char* name = self.name_of(self.symtab[index]);
      if (name == nullptr || std::strcmp(name, "dl_iterate_phdr") != 0) continue;
      void* slot = *reinterpret_cast<void**>(self.base + table[i].r_offset);
      // Bound already (this test called it), or not yet: still this program's own PLT.
      EXPECT_TRUE(slot == libc || self.inside(slot, 1)) << slot;
      ++slots;
    }
  };
  scan(self.jmprel, self.jmprel_count);
  scan(self.rela, self.rela_count);
  EXPECT_EQ(slots, 1);
}

// An object whose dynamic section points outside itself, or uses REL relocations, is refused
// with a reason, never read.
TEST(DynamicSection, RefusesAnOddObject) {
  alignas(8) static unsigned char image[4096];
  auto* dyn = reinterpret_cast<ElfDyn*>(image);
  ElfPhdr phdrs[2]{};
  phdrs[0].p_type = PT_LOAD;
  phdrs[0].p_vaddr = 0;
  phdrs[0].p_memsz = sizeof image;
  phdrs[1].p_type = PT_DYNAMIC;
  phdrs[1].p_vaddr = 0;
  dl_phdr_info info{};
  info.dlpi_addr = reinterpret_cast<ElfAddr>(image);
  info.dlpi_phdr = phdrs;
  info.dlpi_phnum = 2;
  info.dlpi_name = "odd.so";
  DynamicSection d;

  dyn[0] = ElfDyn{DT_SYMTAB, {0x10000000}};  // far past the 4 KB the object has
  dyn[1] = ElfDyn{DT_STRTAB, {512}};
  dyn[2] = ElfDyn{DT_NULL, {0}};
  EXPECT_STREQ(read_dynamic_section(info, d), "a symbol table outside the object");

  dyn[0] = ElfDyn{DT_REL, {512}};
  EXPECT_STREQ(read_dynamic_section(info, d), "REL relocations");

  std::memset(image, 0xff, sizeof image);  // no DT_NULL before the object ends
  EXPECT_STREQ(read_dynamic_section(info, d), "an unterminated dynamic section");

  std::memset(image, 0, sizeof image);
  dyn[0] = ElfDyn{DT_SYMTAB, {1024}};  // offsets from the object's start, as a file has them
  dyn[1] = ElfDyn{DT_STRTAB, {2048}};
  dyn[2] = ElfDyn{DT_STRSZ, {16}};
  dyn[3] = ElfDyn{DT_NULL, {0}};
  EXPECT_EQ(read_dynamic_section(info, d), nullptr);
  EXPECT_EQ(reinterpret_cast<const unsigned char*>(d.symtab), image + 1024);
  EXPECT_EQ(d.rela, nullptr);
  EXPECT_EQ(d.jmprel, nullptr);
}

}  // namespace
}  // namespace sonde
