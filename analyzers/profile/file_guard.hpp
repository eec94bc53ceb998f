// What a reader runs of a profile is its own SQL: the file brings data, never code. Its stored
// views are shadowed by this sonde's (temp views of the reader's connection), its tables must be
// tables, and every statement's work is bounded, so a hostile or damaged file ends a reader with
// one line instead of running it forever.
#pragma once

#include <sqlite3.h>

#include <cstdint>

namespace sonde::analyzers {

class ProfileFile;

// SQLite's virtual-machine steps one reader's statement may take, counted from when the first
// of its open statements was prepared. A report on the 1M-path benchmark file takes about
// 0.4 G (docs/reliability.md): the limit is about 100 times the heaviest reader's there.
inline constexpr std::int64_t kReaderStepLimit = std::int64_t{50} << 30;

// Counts a connection's steps (a progress handler) and interrupts a statement past the limit;
// the count starts again when a statement is prepared with none other open.
class WorkLimit {
 public:
  explicit WorkLimit(sqlite3* db, std::int64_t limit = kReaderStepLimit);
  WorkLimit(const WorkLimit&) = delete;
  WorkLimit& operator=(const WorkLimit&) = delete;
  // The handler stays registered: the connection goes first (ProfileFile's members).

  void statement_opened();
  void statement_closed();
  // Whether the last interruption was this limit's (SQLITE_INTERRUPT has no other source here).
  bool tripped() const { return tripped_; }
  std::int64_t limit() const { return limit_; }
  // 0: no limit (sonde query: the user's own SQL; Ctrl-C ends it).
  void set_limit(std::int64_t limit) { limit_ = limit; }

 private:
  static int on_progress(void* self);

  sqlite3* db_;
  std::int64_t limit_;
  std::int64_t steps_ = 0;
  int open_ = 0;
  bool tripped_ = false;
};

// The schema's views made as temp views of `file`'s connection, standing in front of the file's
// own (SQLite resolves a name in temp before main), and the file's copies of the schema's tables
// checked to be tables. `version`: the file's schema_version (3 and 4 read gpu_activity_ns from
// their timestamps). `unchanging`: no one writes the file while this connection reads it (a
// finished run's, or a copy), so the views every figure reads several times may be computed
// once (see kComputedOnce). Throws Error with one line.
void use_own_views(const ProfileFile& file, int version, bool unchanging);

// routines.dtype and routines.role as far as a file before version 9 lets them be said: from the
// name, the one place sonde still guesses them (wrapper tables state them since). SQL column
// expressions over a routines table aliased `r`; the reader's temp view and `sonde merge` of an
// older file both use them. dtype: a BLAS GEMM, SYRK or GEMV's type from its s/d/c/z prefix;
// role: a CUDA call naming HtoD or DtoH, Synchronize or Launch.
extern const char* const kLegacyDtypeSql;
extern const char* const kLegacyRoleSql;

}  // namespace sonde::analyzers
