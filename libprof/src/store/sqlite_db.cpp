#include "store/sqlite_db.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "store/fd_guard.hpp"

namespace sonde {

namespace {

std::string describe(sqlite3* db, const char* msg) {
  std::string out = msg ? msg : (db ? sqlite3_errmsg(db) : "out of memory");
  // Only for failures of the system: the errno of an earlier, handled call may linger.
  int code = db ? sqlite3_errcode(db) & 0xff : 0;
  int err = db ? sqlite3_system_errno(db) : 0;
  if ((code == SQLITE_IOERR || code == SQLITE_CANTOPEN || code == SQLITE_FULL) && err != 0 &&
      err != ENOSPC) {  // "database or disk is full" says ENOSPC already
    out += std::string(": ") + std::strerror(err);
  }
  return out;
}

int64_t monotonic_ns() {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);
  return int64_t(t.tv_sec) * 1'000'000'000 + t.tv_nsec;
}

// What stat says of the file and its rollback journal, folded into one number that changes
// when either is written.
int64_t file_signature(const std::string& path) {
  int64_t newest = 0;
  for (const std::string& p : {path, path + "-journal"}) {
    struct stat st {};
    if (::stat(p.c_str(), &st) == 0) {
      newest = std::max(newest, int64_t(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec +
                                    int64_t(st.st_size) + int64_t(st.st_ino));
    }
  }
  return newest;
}

}  // namespace

// SQLite's own busy timeout gives up after a fixed time, so among 400 processes ending together
// the unlucky ones, still queued after 15 s, lost their calls (faults: children_exit_together
// lost 11-28 of 401 processes at load 10-14). This one keeps waiting while the others make
// progress. Between tries it sleeps as SQLite's does (1 ms growing to 100 ms): polling every
// 1-4 ms made 400 waiters wake 200,000 times a second and starve the holder (load 267), and a
// random 5-25 ms for every waiter, fairer, took 20-45 % longer to drain the 400.
struct WriterWait {
  std::string path;
  int64_t started_ns = 0;
  int64_t progress_ns = 0;  // when the file was last seen to change
  int64_t seen = 0;         // what file_signature said then
  int64_t next_look_ns = 0;
  int64_t stall_ns = int64_t(kWriterStallS) * 1'000'000'000;
  int64_t max_ns = int64_t(kWriterWaitMaxS) * 1'000'000'000;
  const std::atomic<int>* give_up = nullptr;
  std::atomic<std::uint32_t>* progress = nullptr;  // counts the others' progress seen
};

namespace {

constexpr int64_t kLookNs = 20'000'000;  // how often the file is looked at while waiting

int wait_for_writers(void* arg, int tries) {
  auto& w = *static_cast<WriterWait*>(arg);
  int64_t now = monotonic_ns();
  if (tries == 0) {
    w.started_ns = w.progress_ns = now;
    w.seen = file_signature(w.path);
    w.next_look_ns = now + kLookNs;
  } else if (now >= w.next_look_ns) {
    w.next_look_ns = now + kLookNs;
    if (int64_t c = file_signature(w.path); c != w.seen) {
      w.seen = c;
      w.progress_ns = now;
      if (w.progress != nullptr) w.progress->fetch_add(1, std::memory_order_relaxed);
    }
  }
  if (now - w.progress_ns > w.stall_ns || now - w.started_ns > w.max_ns) {
    return 0;
  }
  if (w.give_up != nullptr && w.give_up->load() != 0) return 0;
  static constexpr long kNapsMs[] = {1, 2, 5, 10, 15, 20, 25, 25, 25, 50, 50, 100};
  constexpr int kNaps = int(sizeof kNapsMs / sizeof kNapsMs[0]);
  timespec nap{0, kNapsMs[std::min(tries, kNaps - 1)] * 1'000'000};
  nanosleep(&nap, nullptr);
  return 1;
}

bool xfsz_pending() {
  sigset_t pending;
  return sigpending(&pending) == 0 && sigismember(&pending, SIGXFSZ) == 1;
}

}  // namespace

Database::Database() = default;
Database::~Database() { close(); }
Database::Database(Database&& other) noexcept
    : db_(other.db_),
      wait_(std::move(other.wait_)),
      filled_std_fds_(other.filled_std_fds_),
      guarding_(other.guarding_) {
  other.db_ = nullptr;
  other.filled_std_fds_ = 0;
  other.guarding_ = false;
}
Database& Database::operator=(Database&& other) noexcept {
  if (this != &other) {
    close();
    db_ = other.db_;
    wait_ = std::move(other.wait_);
    filled_std_fds_ = other.filled_std_fds_;
    guarding_ = other.guarding_;
    other.db_ = nullptr;
    other.filled_std_fds_ = 0;
    other.guarding_ = false;
  }
  return *this;
}

namespace {

// SQLite's unix VFS never takes descriptor 0, 1 or 2 for a file: where one is free it opens
// /dev/null into it and leaves it there, so a host started with stdin closed (`<&-`, a
// posix_spawn action closing 0) found a stdin after sonde's first flush (CPython's test_posix
// caught it). sonde fills the free ones itself before SQLite opens anything, with /dev/null
// opened in a way no program opens its stdin (non-blocking, append, read-only), and empties at
// the connection's close only the slots that still hold that: a stdin the host re-attached to
// /dev/null in the meantime (`close(0); open("/dev/null")`) is its own, and stays.
constexpr int kFillFlags = O_RDONLY | O_NONBLOCK | O_APPEND;

unsigned fill_std_fds() {
  unsigned filled = 0;
  for (int fd = 0; fd <= 2; ++fd) {
    if (fcntl(fd, F_GETFD) != -1 || errno != EBADF) continue;
    int got = ::open("/dev/null", kFillFlags | O_CLOEXEC | O_NOCTTY);
    if (got == fd) {
      filled |= 1u << fd;
    } else if (got > 2) {
      ::close(got);  // the host took the slot meanwhile
    } else if (got >= 0) {
      filled |= 1u << got;  // a lower one the host closed meanwhile: ours too
    }
  }
  return filled;
}

bool is_our_fill(int fd, dev_t null_rdev) {
  struct stat st {};
  int flags = fcntl(fd, F_GETFL);
  return flags != -1 && (flags & (O_ACCMODE | O_NONBLOCK | O_APPEND)) == kFillFlags &&
         fstat(fd, &st) == 0 && S_ISCHR(st.st_mode) && st.st_rdev == null_rdev;
}

void close_filled_std_fds(unsigned filled) {
  struct stat null_st {};
  if (filled == 0 || ::stat("/dev/null", &null_st) != 0) return;
  for (int fd = 0; fd <= 2; ++fd) {
    if ((filled & (1u << fd)) != 0 && is_our_fill(fd, null_st.st_rdev)) ::close(fd);
  }
}

}  // namespace

FileSizeSignalGuard::FileSizeSignalGuard() {
  sigset_t xfsz;
  sigemptyset(&xfsz);
  sigaddset(&xfsz, SIGXFSZ);
  pthread_sigmask(SIG_BLOCK, &xfsz, &old_);
  was_pending_ = xfsz_pending();
}

bool FileSizeSignalGuard::limit_reached() const { return !was_pending_ && xfsz_pending(); }

FileSizeSignalGuard::~FileSizeSignalGuard() {
  if (limit_reached()) {
    sigset_t xfsz;
    sigemptyset(&xfsz);
    sigaddset(&xfsz, SIGXFSZ);
    timespec now{0, 0};
    sigtimedwait(&xfsz, nullptr, &now);
  }
  pthread_sigmask(SIG_SETMASK, &old_, nullptr);
}

std::string Database::message() const { return db_ ? describe(db_, nullptr) : "no database"; }

Statement::Statement(sqlite3* db, std::string_view sql) {
  prepare_rc_ = sqlite3_prepare_v2(db, sql.data(), int(sql.size()), &stmt_, nullptr);
  if (prepare_rc_ != SQLITE_OK) {
    sqlite3_finalize(stmt_);
    stmt_ = nullptr;
  }
}

std::string Statement::column_text(int i) const {
  const auto* p = sqlite3_column_text(stmt_, i);
  return p ? std::string(reinterpret_cast<const char*>(p),
                         static_cast<std::size_t>(sqlite3_column_bytes(stmt_, i)))
           : std::string();
}

int Statement::step() {
  int rc = sqlite3_step(stmt_);
  if (rc != SQLITE_ROW) reset();
  return rc;
}

bool Database::open(const std::string& path, bool create, std::string& error, bool uris) {
  // Filled only where the guard does not move sonde's files high: else for the whole flush a
  // host with stdin closed saw one, beside its fork flush (1 check in 10 under load, CI's
  // test of a host started with stdin closed), where the move leaves a few microseconds.
  filled_std_fds_ = guarded_files_move_high() ? 0 : fill_std_fds();
  if (!guarding_) begin_guarded_opens();  // the journal opens later, in the writes: to close()
  guarding_ = true;
  // NOMUTEX: a connection lives inside one flush, under the store lock, on one thread.
  int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX | (create ? SQLITE_OPEN_CREATE : 0) |
              (uris ? SQLITE_OPEN_URI : 0);
  // With URIs on, a path that happens to begin with "file:" would be parsed as one.
  std::string name = uris && path.rfind("file:", 0) == 0 ? "./" + path : path;
  if (sqlite3_open_v2(name.c_str(), &db_, flags, nullptr) != SQLITE_OK) {
    error = describe(db_, nullptr);
    close();
    return false;
  }
  // Other processes of the run write the same file: wait for them rather than fail.
  if (!wait_) wait_ = std::make_unique<WriterWait>();
  wait_->path = path;
  sqlite3_busy_handler(db_, wait_for_writers, wait_.get());
  // OFF: a crash of the profiled program never loses a committed flush (the data is with the
  // OS); only an OS crash could. Syncing each flush cost 9 fdatasyncs and up to ~50 ms a process.
  return exec("PRAGMA synchronous=OFF", error);
}

int Database::open_readonly(const std::string& path, int busy_ms) {
  close();
  filled_std_fds_ = fill_std_fds();
  // NOMUTEX: a reader's connection is used by one thread at a time (the viewer's server holds
  // its lock around every use), and the serialized mode's lock around every sqlite3_column_*
  // call was 4 % of reading a million nodes.
  int rc = sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, nullptr);
  if (db_ == nullptr) return rc == SQLITE_OK ? SQLITE_NOMEM : rc;
  sqlite3_busy_timeout(db_, busy_ms);
  sqlite3_extended_result_codes(db_, 1);
  return rc;
}

void Database::give_up_when(const std::atomic<int>* flag) {
  if (!wait_) wait_ = std::make_unique<WriterWait>();
  wait_->give_up = flag;
}

void Database::report_progress_to(std::atomic<std::uint32_t>* count) {
  if (!wait_) wait_ = std::make_unique<WriterWait>();
  wait_->progress = count;
}

void Database::set_writer_patience(int stall_ms, int max_ms) {
  if (!wait_) wait_ = std::make_unique<WriterWait>();
  wait_->stall_ns = int64_t(stall_ms) * 1'000'000;
  wait_->max_ns = int64_t(max_ms) * 1'000'000;
}

void Database::close() {
  if (db_) sqlite3_close_v2(db_);
  db_ = nullptr;
  close_filled_std_fds(filled_std_fds_);
  filled_std_fds_ = 0;
  if (guarding_) end_guarded_opens();
  guarding_ = false;
}

bool Database::exec(const char* sql, std::string& error) {
  char* msg = nullptr;
  if (sqlite3_exec(db_, sql, nullptr, nullptr, &msg) != SQLITE_OK) {
    error = describe(db_, msg);
    sqlite3_free(msg);
    return false;
  }
  return true;
}

std::string insert_rows_sql(std::string_view head, int columns, int rows) {
  std::string row = "(?";
  for (int c = 1; c < columns; ++c) row += ",?";
  row += ")";
  std::string sql = std::string(head) + " VALUES ";
  for (int r = 0; r < rows; ++r) sql += r == 0 ? row : "," + row;
  return sql;
}

bool one_int(Database& db, const char* sql, int64_t& value, std::string_view what,
             std::string& error) {
  Statement s(db.handle(), sql);
  if (!s.ok() || s.step() != SQLITE_ROW) {
    error = std::string(what) + ": " + db.message();
    return false;
  }
  value = s.column_int(0);
  s.reset();
  return true;
}

bool took_rowids(Database& db, int64_t last, std::string_view what, std::string& error) {
  int64_t got = sqlite3_last_insert_rowid(db.handle());
  if (got == last) return true;
  error = std::string(what) + " " + std::to_string(last) + " was written as " + std::to_string(got);
  return false;
}

}  // namespace sonde
