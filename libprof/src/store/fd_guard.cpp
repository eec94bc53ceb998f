#include "store/fd_guard.hpp"

#include <errno.h>
#include <fcntl.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>

namespace sonde {
namespace {

// The descriptors sonde's connections opened, by number, with the file each was. A table, not
// state of a connection: SQLite calls these as plain functions, from whichever connection.
// Descriptors from 4096 on are not guarded (a host with that many files open is rare, and its
// sonde descriptors are then as before).
constexpr int kGuarded = 4096;
struct Opened {
  std::atomic<bool> ours{false};
  std::atomic<std::uint64_t> dev{0}, ino{0};
};
Opened g_opened[kGuarded];

// initial-exec, as all of libsonde's thread-local state: the general model's first touch on a
// thread after a dlopen resizes the thread's TLS vector with malloc, which deadlocked the signal
// flush of a host interrupted inside malloc (a flaky fault cell found it: 3 s, then no flush).
thread_local int t_guarding __attribute__((tls_model("initial-exec"))) = 0;

// Where sonde's descriptors are moved: near the top of the guarded range and of the process's
// limit, far above the lowest free numbers that every open of the host's takes. A host that
// closes everything and opens again then gets other numbers than sonde's (checking the file
// before each call leaves a few microseconds between the check and the call: 1 host
// descriptor closed in 7,000 closerange-and-open rounds at 10 flushes a second). 0: not moved
// (a limit too low to spare the room, `ulimit -n 64`).
std::atomic<int> g_high_base{0};

// SQLite's own calls, as the unix VFS had them.
using OpenFn = int (*)(const char*, int, int);
using CloseFn = int (*)(int);
using FstatFn = int (*)(int, struct stat*);
using FtruncateFn = int (*)(int, off_t);
using FcntlFn = int (*)(int, int, ...);
using ReadFn = ssize_t (*)(int, void*, size_t);
using PreadFn = ssize_t (*)(int, void*, size_t, off_t);
using WriteFn = ssize_t (*)(int, const void*, size_t);
using PwriteFn = ssize_t (*)(int, const void*, size_t, off_t);
using FallocateFn = int (*)(int, off_t, off_t);
OpenFn real_open;
CloseFn real_close;
FstatFn real_fstat;
FtruncateFn real_ftruncate;
FcntlFn real_fcntl;
ReadFn real_read;
PreadFn real_pread, real_pread64;
WriteFn real_write;
PwriteFn real_pwrite, real_pwrite64;
FallocateFn real_fallocate;

bool ours(int fd) { return fd >= 0 && fd < kGuarded && g_opened[fd].ours.load(); }

// A descriptor of sonde's that no longer is the file it opened (closed, or the host's now).
bool lost(int fd) {
  if (!ours(fd)) return false;
  struct stat st {};
  if (::fstat(fd, &st) != 0) return true;
  return std::uint64_t(st.st_dev) != g_opened[fd].dev.load() ||
         std::uint64_t(st.st_ino) != g_opened[fd].ino.load();
}

std::atomic<bool> g_out_of_descriptors{false};

int guarded_open(const char* path, int flags, int mode) {
  int fd = real_open(path, flags, mode);
  if (fd < 0 && t_guarding != 0 && (errno == EMFILE || errno == ENFILE))
    g_out_of_descriptors.store(true);
  struct stat file {};
  if (fd < 0 || t_guarding == 0 || ::stat(path, &file) != 0) return fd;
  auto is_file = [&](int d) {
    struct stat st {};
    return ::fstat(d, &st) == 0 && st.st_dev == file.st_dev && st.st_ino == file.st_ino;
  };
  if (g_high_base.load() > fd) {
    int high = real_fcntl(fd, F_DUPFD_CLOEXEC, g_high_base.load());
    if (high >= kGuarded) {
      real_close(high);
    } else if (high >= 0 && !is_file(high)) {
      // The low number was the host's by the time of the copy (its closerange, then its open,
      // between SQLite's open and this): neither copy is sonde's to keep or close but the new.
      real_close(high);
      errno = EIO;
      return -1;
    } else if (high >= 0) {
      real_close(fd);
      fd = high;
    }
  }
  if (fd < kGuarded && is_file(fd)) {
    g_opened[fd].dev.store(std::uint64_t(file.st_dev));
    g_opened[fd].ino.store(std::uint64_t(file.st_ino));
    g_opened[fd].ours.store(true);
  }
  return fd;
}

int guarded_close(int fd) {
  if (!ours(fd)) return real_close(fd);
  bool gone = lost(fd);
  g_opened[fd].ours.store(false);
  return gone ? 0 : real_close(fd);  // the number is the host's now: not sonde's to close
}

// Every other call on a descriptor: refused (EBADF) once the descriptor is not sonde's file.
template <auto& Real, class... A>
auto checked(int fd, A... args) -> decltype(Real(fd, args...)) {
  if (lost(fd)) {
    errno = EBADF;
    return -1;
  }
  return Real(fd, args...);
}

int checked_fcntl(int fd, int cmd, ...) {
  va_list ap;
  va_start(ap, cmd);
  void* arg = va_arg(ap, void*);  // every command SQLite uses takes one word, or none
  va_end(ap);
  return checked<real_fcntl>(fd, cmd, arg);
}

// Replaces `name` in the VFS's table, keeping what was there; a call this SQLite does not have
// (or leaves null) is left alone.
template <class Fn>
bool replace(sqlite3_vfs* vfs, const char* name, Fn& real, Fn guarded) {
  if (vfs->xGetSystemCall == nullptr) return false;
  sqlite3_syscall_ptr current = vfs->xGetSystemCall(vfs, name);
  if (current == nullptr) return true;
  real = reinterpret_cast<Fn>(current);
  return vfs->xSetSystemCall(vfs, name, reinterpret_cast<sqlite3_syscall_ptr>(guarded)) ==
         SQLITE_OK;
}

}  // namespace

bool install_fd_guard() {
  static const bool installed = [] {
    rlimit lim{};
    if (getrlimit(RLIMIT_NOFILE, &lim) == 0) {
      rlim_t top = std::min<rlim_t>(lim.rlim_cur, kGuarded);
      if (top >= 512) g_high_base.store(int(top - 64));
    }
    sqlite3_vfs* vfs = sqlite3_vfs_find("unix");
    if (vfs == nullptr || vfs->iVersion < 3 || vfs->xSetSystemCall == nullptr) return false;
    // The I/O calls first: until "open" is replaced no descriptor is marked, so each guarded
    // call passes through.
    return replace(vfs, "close", real_close, &guarded_close) &&
           replace(vfs, "fstat", real_fstat, &checked<real_fstat, struct stat*>) &&
           replace(vfs, "ftruncate", real_ftruncate, &checked<real_ftruncate, off_t>) &&
           replace(vfs, "fcntl", real_fcntl, &checked_fcntl) &&
           replace(vfs, "read", real_read, &checked<real_read, void*, size_t>) &&
           replace(vfs, "pread", real_pread, &checked<real_pread, void*, size_t, off_t>) &&
           replace(vfs, "pread64", real_pread64, &checked<real_pread64, void*, size_t, off_t>) &&
           replace(vfs, "write", real_write, &checked<real_write, const void*, size_t>) &&
           replace(vfs, "pwrite", real_pwrite, &checked<real_pwrite, const void*, size_t, off_t>) &&
           replace(vfs, "pwrite64", real_pwrite64,
                   &checked<real_pwrite64, const void*, size_t, off_t>) &&
           replace(vfs, "fallocate", real_fallocate, &checked<real_fallocate, off_t, off_t>) &&
           replace(vfs, "open", real_open, &guarded_open);
  }();
  return installed;
}

void reserve_high_descriptors() {
  int base = g_high_base.load();
  if (base == 0) return;
  // An eventfd, not a copy of the host's descriptors: closing a copy of a file would drop the
  // host's fcntl locks on it.
  int probe = eventfd(0, EFD_CLOEXEC);
  if (probe < 0) return;
  int high = ::fcntl(probe, F_DUPFD_CLOEXEC, base);
  if (high >= 0) ::close(high);
  ::close(probe);
}

bool guarded_files_move_high() { return real_open != nullptr && g_high_base.load() > 2; }

void begin_guarded_opens() { ++t_guarding; }
void end_guarded_opens() { --t_guarding; }

bool take_out_of_descriptors() { return g_out_of_descriptors.exchange(false); }

DescriptorHeadroom::DescriptorHeadroom(unsigned more) {
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) != 0 || lim.rlim_cur == RLIM_INFINITY) return;
  old_soft_ = lim.rlim_cur;
  old_hard_ = lim.rlim_max;
  if (lim.rlim_cur < lim.rlim_max)
    lim.rlim_cur = std::min<rlim_t>(lim.rlim_max, lim.rlim_cur + more);
  else  // the hard limit is the soft one (finite): EPERM without CAP_SYS_RESOURCE
    lim.rlim_cur = lim.rlim_max = lim.rlim_max + more;
  raised_ = setrlimit(RLIMIT_NOFILE, &lim) == 0;
}

DescriptorHeadroom::~DescriptorHeadroom() {
  if (!raised_) return;
  // Lowered again below descriptors SQLite may still hold: they stay valid (the limit bounds
  // new ones only), and by now the connection has closed them.
  rlimit lim{rlim_t(old_soft_), rlim_t(old_hard_)};
  setrlimit(RLIMIT_NOFILE, &lim);  // a hard limit raised is lowered back without privilege
}

}  // namespace sonde
