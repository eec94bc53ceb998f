#include "symbols/elf_symbols.hpp"

#include <dlfcn.h>
#include <elf.h>
#include <gtest/gtest.h>

#include <cstring>

#include "temp_dir.hpp"

namespace sonde {
namespace {

// A local function: only .symtab names it, dladdr cannot.
__attribute__((noinline)) int elf_probe_target(int x) {
  asm volatile("" ::: "memory");
  return x * 3 + 1;
}

// The file-relative address ElfSymbols expects for a code address of this program.
uint64_t file_address(const void* code, const ElfSymbols& symbols) {
  Dl_info info{};
  EXPECT_NE(dladdr(const_cast<void*>(code), &info), 0);
  auto a = reinterpret_cast<uintptr_t>(code);
  return symbols.position_dependent() ? a : a - reinterpret_cast<uintptr_t>(info.dli_fbase);
}

TEST(ElfSymbols, FindsALocalFunctionOfThisProgram) {
  ASSERT_EQ(elf_probe_target(1), 4);
  ElfSymbols symbols("/proc/self/exe");
  auto* code = reinterpret_cast<const char*>(&elf_probe_target);
  uint64_t at = file_address(code, symbols);
  const char* name = symbols.function_at(at);
  ASSERT_NE(name, nullptr);
  EXPECT_NE(std::strstr(name, "elf_probe_target"), nullptr) << name;
  // An address inside the body names the same function.
  const char* inside = symbols.function_at(at + 2);
  ASSERT_NE(inside, nullptr);
  EXPECT_STREQ(inside, name);
}

TEST(ElfSymbols, NamesTwoFunctionsApart) {
  ElfSymbols symbols("/proc/self/exe");
  uint64_t a = file_address(reinterpret_cast<const void*>(&elf_probe_target), symbols);
  uint64_t b = file_address(reinterpret_cast<const void*>(&file_address), symbols);
  const char* na = symbols.function_at(a);
  const char* nb = symbols.function_at(b);
  ASSERT_NE(na, nullptr);
  ASSERT_NE(nb, nullptr);
  EXPECT_NE(std::strstr(nb, "file_address"), nullptr) << nb;
  EXPECT_STRNE(na, nb);
}

TEST(ElfSymbols, NoFunctionOutsideTheCode) {
  ElfSymbols symbols("/proc/self/exe");
  EXPECT_EQ(symbols.function_at(0), nullptr);
  EXPECT_EQ(symbols.function_at(0x10), nullptr);  // the ELF header
  EXPECT_EQ(symbols.function_at(uint64_t(1) << 60), nullptr);
}

TEST(ElfSymbols, UnreadableOrForeignFilesGiveNoSymbols) {
  test::TempDir dir;
  std::string exe = test::read_all("/proc/self/exe");
  ASSERT_GT(exe.size(), 4096u);
  for (const std::string& path :
       {dir.write("text.txt", std::string(4096, 'x') + "not an ELF file\n"), dir.write("empty", ""),
        dir.write("header-only", exe.substr(0, 64)),  // section table beyond the end
        dir.write("truncated", exe.substr(0, 4096)), dir.file("missing")}) {
    ElfSymbols symbols(path);
    EXPECT_EQ(symbols.function_at(0), nullptr) << path;
    EXPECT_EQ(symbols.function_at(0x1000), nullptr) << path;
    EXPECT_EQ(symbols.function_at(uint64_t(1) << 40), nullptr) << path;
  }
}

// A section-table offset near 2^64 must not wrap the bounds check into reading far outside
// the mapping: such a library loads fine (the loader reads only program headers), and a flush
// naming a call site in it would crash the host. Run in a child so a crash fails this test only.
TEST(ElfSymbolsDeathTest, CorruptSectionTableOffsetDoesNotCrash) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  test::TempDir dir;
  std::string exe = test::read_all("/proc/self/exe");
  ASSERT_GT(exe.size(), sizeof(Elf64_Ehdr));
  auto* eh = reinterpret_cast<Elf64_Ehdr*>(exe.data());
  // e_shoff + 65535 * 64 wraps to 64: the table would start 4 MiB before the file's mapping.
  eh->e_shnum = 0xffff;
  eh->e_shoff = uint64_t(0) - uint64_t(0xffff) * sizeof(Elf64_Shdr) + 64;
  std::string path = dir.write("corrupt", exe);
  EXPECT_EXIT(
      {
        ElfSymbols symbols(path);
        std::exit(symbols.function_at(0x1000) == nullptr ? 0 : 1);
      },
      testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace sonde
