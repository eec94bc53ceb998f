// Read-only access to a sonde profile (a SQLite file written by libprof).
#pragma once

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "base/cell.hpp"
#include "base/error.hpp"
#include "profile/file_guard.hpp"
#include "store/schema_version.hpp"
#include "store/sqlite_db.hpp"

namespace sonde::analyzers {

// The newest schema_version this sonde understands: the one libsonde writes.
using sonde::kSchemaVersion;

class ProfileFile;

// A statement of an open file; it must not outlive the file (its end is counted there, for the
// file's work limit): `ProfileFile::open(p).prepare(...)` kept in a variable is a dangling one.
class Statement {
 public:
  Statement(const ProfileFile& file, std::string_view sql);
  Statement(Statement&&) noexcept;
  Statement& operator=(Statement&&) = delete;
  ~Statement();

  Statement& bind(int index, std::int64_t value);
  Statement& bind(int index, std::string_view value);
  bool step();  // true while a row is available
  bool is_readonly() const;

  int column_count() const;
  std::string column_name(int col) const;
  bool is_null(int col) const;
  std::int64_t int64(int col) const;
  double real(int col) const;
  std::string text(int col) const;
  Cell cell(int col) const;

 private:
  const ProfileFile* file_;
  sonde::Statement stmt_;  // the one SQLite wrapper, libsonde's; errors thrown here
};

// The processes that began the run or made its file (run_info `output.claimed`): which one
// wrote first is what a reader checks (profile/run_summary.cpp, rank_file.cpp).
inline constexpr const char* kRunFirstProcesses =
    "SELECT process_id FROM processes WHERE origin = 'root' OR process_id IN (SELECT "
    "process_id FROM run_info WHERE key = 'output.claimed')";

class ProfileFile {
 public:
  // Opens read-only and checks that this is a sonde profile this version can read, whole
  // (quick_check up to 64 MB); never creates a file. A journal left by a writer that died in a
  // flush is rolled back first (through a read-write connection: said on stderr). Throws Error
  // with a one-line reason. `check_pages` false leaves quick_check out, for a caller that only
  // looks up a row (sonde run finding the file its run wrote: 40 ms for 5 MB, 0.15 s of CPU for
  // 44 MB at the end of every run); a damaged page then fails the query that reads it.
  static ProfileFile open(const std::string& path, bool check_pages = true);
  // Rank `rank` of a merged or ranked profile alone, as its own file would read, in memory
  // (profile/rank_file.cpp).
  static ProfileFile open_rank(const std::string& path, std::int64_t rank);
  // Those processes of an open file alone (their threads, call paths and all recorded under
  // them), in memory, as open_rank takes a rank's: what a rank's or a process's figures are
  // computed from with the views every file has.
  static ProfileFile open_processes(const ProfileFile& source,
                                    const std::vector<std::int64_t>& process_ids);

  ProfileFile(ProfileFile&&) noexcept = default;
  ProfileFile& operator=(ProfileFile&&) noexcept = default;
  ~ProfileFile();

  const std::string& path() const { return path_; }
  int schema_version() const { return schema_version_; }
  // Whether this is some processes of a file (open_processes) that leave out the process that
  // began the run or made the file, which wrote to it: what that process wrote is not here, and
  // its absence says nothing of the run.
  bool first_process_left_out() const { return first_process_left_out_; }
  sqlite3* db() const { return db_.handle(); }

  Statement prepare(std::string_view sql) const { return Statement(*this, sql); }
  // Throws Error where the call tree's parent links form a cycle (a crafted file: SQLite's
  // quick_check passes it). Asked by the readers that follow the links to the root, whose walks
  // (callers, the view, the folded, csv and svg exports, the merged tree, node_paths) never
  // ended on one; not on every open, where it cost `sonde report` on 1M rows a scan (0.11 s
  // to 0.16 s).
  void check_tree_links() const;
  // Whether a parent link goes to the same or a later node: none in any file sonde writes; a
  // cycle needs one (check_tree_links then follows the links whole).
  bool has_later_parent_links() const;
  bool has_table(std::string_view name) const;
  // Whether a table of the schema holds any row (the name is the schema's own, never a user's).
  bool has_rows(std::string_view table) const;
  // Executes statements that return no rows (PRAGMAs).
  void exec(const std::string& sql) const;

  // Turns a SQLite failure into a user-facing Error (corrupt, not a database, SQL error, a
  // statement past the work limit).
  [[noreturn]] void fail(int rc, std::string_view what = {}) const;

  // The steps one statement may take (file_guard.hpp); 0: unbounded.
  void set_step_limit(std::int64_t steps) { limit_->set_limit(steps); }
  WorkLimit& work_limit() const { return *limit_; }

 private:
  explicit ProfileFile(std::string path);
  static ProfileFile open_read_only(const std::string& path);
  void limit_work();  // once the connection is open

  std::string path_;
  std::unique_ptr<WorkLimit> limit_;  // before db_: the connection closes first
  sonde::Database db_;
  int schema_version_ = 0;
  bool first_process_left_out_ = false;
};

}  // namespace sonde::analyzers
