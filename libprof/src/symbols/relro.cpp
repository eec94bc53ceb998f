#include "symbols/relro.hpp"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

namespace sonde {

std::pair<uintptr_t, uintptr_t> relro_of(const DynamicSection& d) {
  uintptr_t page = uintptr_t(sysconf(_SC_PAGESIZE));
  for (int i = 0; i < d.phnum; ++i) {
    if (d.phdr[i].p_type != PT_GNU_RELRO) continue;
    uintptr_t start = (d.base + d.phdr[i].p_vaddr) & ~(page - 1);
    uintptr_t end = (d.base + d.phdr[i].p_vaddr + d.phdr[i].p_memsz) & ~(page - 1);
    return {start, end};
  }
  return {0, 0};
}

bool ReadOnlyMappings::hold(uintptr_t address) {
  if (!read_) {
    read_ = true;
    int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
    std::string text;
    char buf[16384];
    ssize_t n = 0;
    while (fd >= 0 && ((n = read(fd, buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR))) {
      if (n > 0) text.append(buf, size_t(n));
    }
    if (fd >= 0) close(fd);
    // Lines of "start-end perms offset dev inode path", addresses in hexadecimal.
    for (size_t at = 0; at < text.size();) {
      size_t end = text.find('\n', at);
      if (end == std::string::npos) end = text.size();
      char* rest = nullptr;
      uintptr_t lo = std::strtoull(text.c_str() + at, &rest, 16);
      uintptr_t hi = *rest == '-' ? std::strtoull(rest + 1, &rest, 16) : 0;
      if (*rest == ' ' && rest[1] == 'r' && rest[2] == '-') ranges_.emplace_back(lo, hi);
      at = end + 1;
    }
  }
  for (auto [lo, hi] : ranges_) {
    if (address >= lo && address < hi) return true;
  }
  return false;
}

}  // namespace sonde
