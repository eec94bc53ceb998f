// The sign of a finished relocation that rebinding reads where glibc has no _dl_find_object:
// the RELRO pages' protection in /proc/self/maps.
#include "symbols/relro.hpp"

#include <gtest/gtest.h>
#include <link.h>
#include <sys/mman.h>

#include <string>

namespace sonde {
namespace {

struct Objects {
  int with_relro = 0;
  int read_only = 0;
  DynamicSection program;
  bool have_program = false;
};

int look(dl_phdr_info* info, size_t, void* data) {
  auto* o = static_cast<Objects*>(data);
  DynamicSection d;
  if (read_dynamic_section(*info, d) != nullptr) return 0;
  auto [start, end] = relro_of(d);
  if (start >= end) return 0;
  ++o->with_relro;
  ReadOnlyMappings maps;
  if (maps.hold(start)) ++o->read_only;
  if (info->dlpi_name == nullptr || info->dlpi_name[0] == '\0') {
    o->program = d;
    o->have_program = true;
  }
  return 0;
}

TEST(Relro, EveryRelocatedObjectsRelroIsReadOnly) {
  Objects o;
  dl_iterate_phdr(look, &o);
  ASSERT_GT(o.with_relro, 1);  // the program and libc at least (Debian links with -z relro)
  EXPECT_EQ(o.read_only, o.with_relro);
}

TEST(Relro, PagesMadeWritableAgainReadAsNotRelocated) {
  Objects o;
  dl_iterate_phdr(look, &o);
  ASSERT_TRUE(o.have_program);
  auto [start, end] = relro_of(o.program);
  ASSERT_EQ(mprotect(reinterpret_cast<void*>(start), end - start, PROT_READ | PROT_WRITE), 0);
  ReadOnlyMappings writable;
  bool held = writable.hold(start);
  ASSERT_EQ(mprotect(reinterpret_cast<void*>(start), end - start, PROT_READ), 0);
  EXPECT_FALSE(held);
  ReadOnlyMappings again;
  EXPECT_TRUE(again.hold(start));
  EXPECT_FALSE(again.hold(0));
}

}  // namespace
}  // namespace sonde
