// The path of libsonde as LD_PRELOAD can carry it.
//
// ld.so splits LD_PRELOAD at spaces and colons, with no way to quote one: a venv in
// "/home/me/My Projects/" gave every process of `sonde run` "ERROR: ld.so: object '/home/me/My'
// from LD_PRELOAD cannot be preloaded", and no profile (a red-team find; `python3 -m sonde`'s
// children said the same). Such a library is named through a symbolic link in a directory of
// the user's own whose path has neither (TMPDIR, /tmp, /dev/shm, /var/tmp), made once per
// library (its name from a hash of the real path) and kept. Header-only: the launcher (sonde run,
// sonde tune) and libsonde (its children's environment) both use it. python_hook/sonde/
// _in_process.py does the same for python3 -m sonde.
#pragma once

#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <string>

namespace sonde {

inline bool preload_can_carry(const std::string& path) {
  return path.find_first_of(" :\t\n") == std::string::npos;
}

// `lib` itself where LD_PRELOAD can carry it, else a link to its real path; "" where no link
// could be made (`why` says what was tried).
inline std::string preloadable_path(const std::string& lib, std::string* why = nullptr) {
  if (preload_can_carry(lib)) return lib;
  char real[PATH_MAX];
  std::string target = ::realpath(lib.c_str(), real) != nullptr ? real : lib;
  uint64_t h = 1469598103934665603ull;  // FNV-1a of the real path
  for (unsigned char c : target) h = (h ^ c) * 1099511628211ull;
  char name[64];
  std::snprintf(name, sizeof name, "libsonde-%016llx.so", static_cast<unsigned long long>(h));
  const char* tmpdir = ::getenv("TMPDIR");
  std::string tried;
  for (const char* base : {tmpdir, "/tmp", "/dev/shm", "/var/tmp"}) {
    if (base == nullptr || *base == '\0' || !preload_can_carry(base)) continue;
    std::string dir = std::string(base) + "/sonde-" + std::to_string(::geteuid());
    tried += (tried.empty() ? "" : ", ") + dir;
    ::mkdir(dir.c_str(), 0700);
    struct stat st {};
    // The user's own directory, not a link someone else put there.
    if (::lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != ::geteuid() ||
        (st.st_mode & 022) != 0)
      continue;
    std::string link = dir + "/" + name;
    char have[PATH_MAX];
    ssize_t n = ::readlink(link.c_str(), have, sizeof have - 1);
    if (n > 0 && std::string(have, size_t(n)) == target) return link;
    std::string temp = link + "." + std::to_string(::getpid());
    ::unlink(temp.c_str());
    if (::symlink(target.c_str(), temp.c_str()) == 0 && ::rename(temp.c_str(), link.c_str()) == 0)
      return link;
    ::unlink(temp.c_str());
  }
  if (why != nullptr)
    *why =
        "its path holds a space or a colon, which LD_PRELOAD cannot carry, and no link to it "
        "could be made in " +
        (tried.empty() ? std::string("a temporary directory") : tried);
  return "";
}

}  // namespace sonde
