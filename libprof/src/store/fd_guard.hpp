// sonde's SQLite files must never become the host's. A host that closes every descriptor while
// a flush runs (a daemon's `closerange(3, ...)`, a sandbox) and opens a file of its own gets the
// number SQLite still holds: SQLite would then read, write, lock and finally close the host's
// file (seen: the host's fresh descriptor closed under it, EBADF). Through SQLite's documented
// system-call table (sqlite3_vfs.xSetSystemCall) the unix VFS's calls on descriptors that sonde's
// own connections opened check first that the descriptor is still the file that was opened
// (device and inode); one that is not fails with EBADF, and is never closed.
#pragma once

namespace sonde {

// Installs the checks in the process's unix VFS; libsonde only (the analyzers' own SQLite runs
// in processes nothing closes under them). Idempotent; false where the VFS does not offer it.
bool install_fd_guard();

// Grows the process's descriptor table now to hold the numbers sonde's files are moved to
// (near 4,096). Linux grows the table of a process that has more than one thread only after an
// RCU grace period: 21 ms of wall time, and no CPU, here, which every process paid at its first
// flush, when sonde's own thread is there. With one thread it costs microseconds, so this is
// called where the process has one (at start and in a fork child, whose table is copied only up
// to its highest open descriptor), before sonde's thread starts. Call after install_fd_guard.
void reserve_high_descriptors();

// True once install_fd_guard has moved sonde's files to high numbers (a limit that leaves room
// for them): SQLite, which never keeps a file at 0, 1 or 2, then never meets one of those.
bool guarded_files_move_high();

// Between the two (a writer connection's life: Database), the files SQLite opens on this thread
// are sonde's, and guarded. The host's own SQLite (Python's sqlite3 shares the library) opens on
// its threads, unguarded.
void begin_guarded_opens();
void end_guarded_opens();

// Whether one of sonde's opens failed for want of a descriptor (EMFILE, ENFILE) since the last
// call; reading it clears it.
bool take_out_of_descriptors();

// The soft RLIMIT_NOFILE raised by `more` within the hard limit while it lives, the old one
// back after: a host holding every descriptor its soft limit allows (1,024 by default, the hard
// one much higher) still gets its profile. Where the hard limit is the soft one (`ulimit -n 64`
// sets both; a container's nofile), both are raised, which a process may only with
// CAP_SYS_RESOURCE (root in a container, most often), and both put back. (Spare descriptors
// kept open instead were seen by every program that lists its own: CPython's
// test_pass_fds_redirected failed.) `raised()` false where neither could be.
class DescriptorHeadroom {
 public:
  explicit DescriptorHeadroom(unsigned more);
  ~DescriptorHeadroom();
  DescriptorHeadroom(const DescriptorHeadroom&) = delete;
  DescriptorHeadroom& operator=(const DescriptorHeadroom&) = delete;
  bool raised() const { return raised_; }

 private:
  unsigned long long old_soft_ = 0, old_hard_ = 0;
  bool raised_ = false;
};

}  // namespace sonde
