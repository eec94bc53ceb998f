// setuid and its kin change the ids of every thread of the process: glibc makes each thread
// make the call in turn (its SIGSETXID handler) and aborts the process when one thread's call
// fails where the caller's worked. A host that keeps its capabilities across a uid change with
// per-thread calls (PR_SET_KEEPCAPS and capset, as `setpriv --reuid --regid` and daemons that
// drop privileges do) holds them on its own thread only: sonde's flusher thread, which lost
// them at the uid change, failed the gid change that followed, and the host died (SIGABRT). So
// sonde's thread is not there for the call: stopped before it, and started again after it from
// the calling thread, whose ids and capabilities a new thread inherits.
//
// Entering a new user namespace (unshare(CLONE_NEWUSER), setns into one) is refused by the
// kernel to a process of more than one thread (EINVAL): with sonde's thread there, `unshare -U`,
// `unshare -r` and the fork-then-unshare of sandboxes (bubblewrap, rootless containers) failed
// under sonde. Those calls get the same treatment.
#include <errno.h>
#include <grp.h>
#include <linux/nsfs.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <array>
#include <cstddef>
#include <mutex>

#include "../intercept.hpp"
#include "sonde/process_hooks.hpp"

namespace {

#define SONDE_TABLE "process/credential_calls.def"  // relative to wrapper_table.inc
#define SONDE_LIBC(NAME) SONDE_TABLE_ROW(NAME)
#include "../wrapper_table.inc"
#undef SONDE_LIBC
#undef SONDE_TABLE

// Resolved as the library loads: Python's subprocess changes ids in its vfork child, where a
// first dlsym could allocate in memory the parent shares.
__attribute__((constructor(102))) void resolve_credential_calls() {
  for (auto& symbol : g_real) symbol.get();
}

// Two host threads changing ids at once would both stop (join) the one flusher.
std::mutex g_changing;

template <auto& Fn>
auto real(Entry id) {
  return reinterpret_cast<decltype(&Fn)>(g_real[size_t(id)].get());
}

// The real call, with sonde's thread away for it; errno is the call's.
template <auto& Fn, class... A>
int without_sonde_thread(Entry id, A... args) {
  auto real = ::real<Fn>(id);
  std::lock_guard one_at_a_time(g_changing);
  bool stopped = sonde::credentials_changing();
  int rc = real(args...);
  int saved = errno;
  if (stopped) sonde::credentials_changed();
  errno = saved;
  return rc;
}

}  // namespace

SONDE_EXPORT_C int setuid(uid_t uid) { return without_sonde_thread<::setuid>(Entry::setuid, uid); }
SONDE_EXPORT_C int setgid(gid_t gid) { return without_sonde_thread<::setgid>(Entry::setgid, gid); }
SONDE_EXPORT_C int seteuid(uid_t uid) {
  return without_sonde_thread<::seteuid>(Entry::seteuid, uid);
}
SONDE_EXPORT_C int setegid(gid_t gid) {
  return without_sonde_thread<::setegid>(Entry::setegid, gid);
}
SONDE_EXPORT_C int setreuid(uid_t r, uid_t e) {
  return without_sonde_thread<::setreuid>(Entry::setreuid, r, e);
}
SONDE_EXPORT_C int setregid(gid_t r, gid_t e) {
  return without_sonde_thread<::setregid>(Entry::setregid, r, e);
}
SONDE_EXPORT_C int setresuid(uid_t r, uid_t e, uid_t s) {
  return without_sonde_thread<::setresuid>(Entry::setresuid, r, e, s);
}
SONDE_EXPORT_C int setresgid(gid_t r, gid_t e, gid_t s) {
  return without_sonde_thread<::setresgid>(Entry::setresgid, r, e, s);
}
SONDE_EXPORT_C int setgroups(size_t n, const gid_t* list) {
  return without_sonde_thread<::setgroups>(Entry::setgroups, n, list);
}

// Only a change of user namespace needs one thread; other namespaces are the caller's alone.
SONDE_EXPORT_C int unshare(int flags) {
  if ((flags & CLONE_NEWUSER) == 0) return real<::unshare>(Entry::unshare)(flags);
  return without_sonde_thread<::unshare>(Entry::unshare, flags);
}

SONDE_EXPORT_C int setns(int fd, int nstype) {
  // 0 lets the descriptor say which namespace it is; one that does not say (a pidfd, which
  // names several at once) may hold a user namespace.
  bool user = (nstype & CLONE_NEWUSER) != 0;
  if (nstype == 0) {
    int saved = errno;
    int type = ::ioctl(fd, NS_GET_NSTYPE);
    errno = saved;
    user = type < 0 || type == CLONE_NEWUSER;
  }
  if (!user) return real<::setns>(Entry::setns)(fd, nstype);
  return without_sonde_thread<::setns>(Entry::setns, fd, nstype);
}
