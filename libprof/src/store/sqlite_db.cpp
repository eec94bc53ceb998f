#include "store/sqlite_db.hpp"

#include <time.h>

#include <cerrno>
#include <cstring>

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

bool xfsz_pending() {
  sigset_t pending;
  return sigpending(&pending) == 0 && sigismember(&pending, SIGXFSZ) == 1;
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
  sqlite3_busy_timeout(db_, 15000);
  // OFF: a crash of the profiled program never loses a committed flush (the data is with the
  // OS); only an OS crash could. Syncing each flush cost 9 fdatasyncs and up to ~50 ms a process.
  return exec("PRAGMA synchronous=OFF", error);
}

int Database::open_readonly(const std::string& path, int busy_ms) {
  close();
  int rc = sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READONLY, nullptr);
  if (db_ == nullptr) return rc == SQLITE_OK ? SQLITE_NOMEM : rc;
  sqlite3_busy_timeout(db_, busy_ms);
  sqlite3_extended_result_codes(db_, 1);
  return rc;
}

void Database::close() {
  if (db_) sqlite3_close_v2(db_);
  db_ = nullptr;
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

}  // namespace sonde
