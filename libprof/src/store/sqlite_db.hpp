// Minimal RAII over SQLite's C API for the writer: a connection and prepared statements whose
// errors become a message rather than an exception.
#pragma once

#include <signal.h>
#include <sqlite3.h>

#include <cstdint>
#include <string>
#include <string_view>

namespace sonde {

class Statement {
 public:
  Statement(sqlite3* db, std::string_view sql);
  ~Statement() { sqlite3_finalize(stmt_); }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  bool ok() const { return stmt_ != nullptr; }
  Statement& bind(int i, int64_t v) { sqlite3_bind_int64(stmt_, i, v); return *this; }
  Statement& bind(int i, double v) { sqlite3_bind_double(stmt_, i, v); return *this; }
  // Not copied: every caller steps the statement while the text it bound is still alive.
  Statement& bind(int i, std::string_view v) {
    sqlite3_bind_text(stmt_, i, v.data(), int(v.size()), SQLITE_STATIC);
    return *this;
  }
  Statement& bind_null(int i) { sqlite3_bind_null(stmt_, i); return *this; }
  // Runs to completion (or to the first row); resets for reuse. SQLITE_ROW or SQLITE_DONE.
  int step();
  int64_t column_int(int i) { return sqlite3_column_int64(stmt_, i); }
  void reset() { sqlite3_reset(stmt_); sqlite3_clear_bindings(stmt_); }

 private:
  sqlite3_stmt* stmt_ = nullptr;
};

// Held around every write of the profile. A file-size limit (ulimit -f) or a full disk must fail
// sonde's write, not kill the host: SIGXFSZ, which the kernel sends to the writing thread, is
// blocked on this thread for the while and the one a write of ours raised is taken back.
class FileSizeSignalGuard {
 public:
  FileSizeSignalGuard();
  ~FileSizeSignalGuard();
  FileSizeSignalGuard(const FileSizeSignalGuard&) = delete;
  FileSizeSignalGuard& operator=(const FileSizeSignalGuard&) = delete;
  // A write since the guard was made went past RLIMIT_FSIZE (SQLite says only "disk I/O error").
  bool limit_reached() const;

 private:
  sigset_t old_;
  bool was_pending_ = false;
};

class Database {
 public:
  ~Database() { close(); }
  bool open(const std::string& path, bool create, std::string& error);
  void close();
  bool exec(const char* sql, std::string& error);
  sqlite3* handle() { return db_; }
  // SQLite's message, with the system's reason where there is one ("disk I/O error: File too
  // large").
  std::string message() const;

 private:
  sqlite3* db_ = nullptr;
};

}  // namespace sonde
