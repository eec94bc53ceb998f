// The one RAII layer over SQLite's C API, for libsonde's writer and the analyzers' reader alike:
// a connection and prepared statements whose errors become a return code and a message rather
// than an exception (the analyzers turn them into their own Error).
#pragma once

#include <signal.h>
#include <sqlite3.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace sonde {

class Statement {
 public:
  Statement(sqlite3* db, std::string_view sql);
  ~Statement() { sqlite3_finalize(stmt_); }
  Statement(Statement&& other) noexcept : stmt_(other.stmt_), prepare_rc_(other.prepare_rc_) {
    other.stmt_ = nullptr;
  }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;
  Statement& operator=(Statement&&) = delete;

  bool ok() const { return stmt_ != nullptr; }
  // sqlite3_prepare_v2's result (SQLITE_OK when ok()).
  int prepare_rc() const { return prepare_rc_; }
  Statement& bind(int i, int64_t v) {
    sqlite3_bind_int64(stmt_, i, v);
    return *this;
  }
  Statement& bind(int i, double v) {
    sqlite3_bind_double(stmt_, i, v);
    return *this;
  }
  // Not copied: every caller steps the statement while the text it bound is still alive.
  Statement& bind(int i, std::string_view v) {
    sqlite3_bind_text(stmt_, i, v.data(), int(v.size()), SQLITE_STATIC);
    return *this;
  }
  // Copied, for callers that cannot promise that.
  Statement& bind_copy(int i, std::string_view v) {
    sqlite3_bind_text(stmt_, i, v.data(), int(v.size()), SQLITE_TRANSIENT);
    return *this;
  }
  Statement& bind_null(int i) {
    sqlite3_bind_null(stmt_, i);
    return *this;
  }
  // Runs to completion (or to the first row); resets for reuse. SQLITE_ROW or SQLITE_DONE, else
  // the error (the connection's message says more).
  int step();
  void reset() {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
  }

  int column_count() const { return sqlite3_column_count(stmt_); }
  std::string column_name(int i) const {
    const char* name = sqlite3_column_name(stmt_, i);
    return name ? name : "";
  }
  int column_type(int i) const { return sqlite3_column_type(stmt_, i); }
  int64_t column_int(int i) const { return sqlite3_column_int64(stmt_, i); }
  double column_double(int i) const { return sqlite3_column_double(stmt_, i); }
  std::string column_text(int i) const;
  int column_bytes(int i) const { return sqlite3_column_bytes(stmt_, i); }
  bool readonly() const { return sqlite3_stmt_readonly(stmt_) != 0; }

 private:
  sqlite3_stmt* stmt_ = nullptr;
  int prepare_rc_ = SQLITE_OK;
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

// How long a writer waits for the others of its run: while the file keeps changing (they are
// writing, in turn), up to kWriterWaitMax; once it has not changed for kWriterStall, it gives
// up (a writer stopped or stuck holds the lock).
inline constexpr int kWriterStallS = 15;
inline constexpr int kWriterWaitMaxS = 90;

// The writer's busy handler's state (sqlite_db.cpp); it must outlive the connection.
struct WriterWait;

class Database {
 public:
  Database();
  ~Database();
  Database(Database&& other) noexcept;
  Database& operator=(Database&& other) noexcept;
  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;

  // The writer's connection: read-write (created when `create`), synchronous off, waits for
  // other writers as the constants above say. `uris`: names given to ATTACH may be file: URIs
  // (sonde merge attaches its inputs read-only so); the path itself is taken as a plain name either
  // way.
  bool open(const std::string& path, bool create, std::string& error, bool uris = false);
  // The writer's wait, other than kWriterStallS and kWriterWaitMaxS, for the connections
  // open() makes after (tests).
  void set_writer_patience(int stall_ms, int max_ms);
  // The writer's wait ends (SQLITE_BUSY) once `flag` is not 0, for the connections open()
  // makes after; nullptr: as the constants above say.
  void give_up_when(const std::atomic<int>* flag);
  // Each change of the file seen while waiting for the other writers (they write, in turn)
  // adds one to `count`, for the connections open() makes after; nullptr: none counted.
  void report_progress_to(std::atomic<std::uint32_t>* count);
  // A reader's: read-only, never creates, waits `busy_ms` for a writer's lock, extended result
  // codes. SQLite's code on failure (the connection, kept open, has the message), else SQLITE_OK.
  int open_readonly(const std::string& path, int busy_ms);
  void close();
  bool exec(const char* sql, std::string& error);
  sqlite3* handle() const { return db_; }
  // SQLite's message, with the system's reason where there is one ("disk I/O error: File too
  // large").
  std::string message() const;

 private:
  sqlite3* db_ = nullptr;
  std::unique_ptr<WriterWait> wait_;
  // Which of descriptors 0-2 sonde filled with /dev/null for the connection (SQLite never opens
  // a file as one of them, and would fill them itself, for good); close() empties them.
  unsigned filled_std_fds_ = 0;
  bool guarding_ = false;  // a writer's connection: its files are guarded (store/fd_guard.hpp)
};

// Bulk writes (store_nodes.cpp, store_routines.cpp): `head` is "INSERT INTO t (a, b, ...)",
// followed by `rows` rows of `columns` parameters each.
std::string insert_rows_sql(std::string_view head, int columns, int rows);
// A single integer from `sql`'s first row; false with `error` ("WHAT: SQLite's message").
bool one_int(Database& db, const char* sql, int64_t& value, std::string_view what,
             std::string& error);
// A statement that inserted rows given no id took the largest + 1 each, so its last row is
// `last`: anything else (never seen; only a table at the largest rowid picks at random) fails
// the flush, whose rows' ids were handed out already. `what`: "node", "routine".
bool took_rowids(Database& db, int64_t last, std::string_view what, std::string& error);

}  // namespace sonde
