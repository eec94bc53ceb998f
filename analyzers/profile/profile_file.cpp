#include "profile/profile_file.hpp"

#include <fmt/format.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <initializer_list>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "profile/process_alive.hpp"
#include "schema_sql.hpp"  // generated from store_schema.sql and store_views.sql
#include "sonde/output_name.hpp"

namespace sonde::analyzers {
namespace {

// A running program may hold the write lock during a flush; wait that long before giving up.
constexpr int kBusyTimeoutMs = 2000;

std::int64_t check_readable(const std::string& path) {
  std::error_code ec;
  if (std::string full = std::filesystem::absolute(path, ec).string();
      !ec && full.size() > sonde::kLongestProfilePath)
    throw Error(
        fmt::format("cannot open {}: its full path is {} bytes long, over the {} SQLite "
                    "can open a file by; move it, or link it from a shorter path",
                    path, full.size(), sonde::kLongestProfilePath));
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) throw Error(fmt::format("cannot open {}: no such file", path));
    throw Error(fmt::format("cannot open {}: {}", path, std::strerror(errno)));
  }
  if (S_ISDIR(st.st_mode)) throw Error(fmt::format("cannot open {}: is a directory", path));
  if (::access(path.c_str(), R_OK) != 0)
    throw Error(fmt::format("cannot open {}: {}", path, std::strerror(errno)));
  // sonde claims its file empty and writes the blank profile into it whole: one left empty was
  // made by a process killed within its first millisecond.
  if (st.st_size == 0)
    throw Error(
        fmt::format("{} is empty: the process that made it was killed as it started (nothing was "
                    "measured into it), or it is not a sonde profile",
                    path));
  return st.st_size;
}

// A writer killed inside a flush leaves a hot journal: its half-written pages are in the file and
// the way back is in <file>-journal. SQLite rolls it back on the next read, but only through a
// connection that may write, so the reader opens one for that alone.
void roll_back_journal(const std::string& path) {
  sonde::Database db;
  std::string msg;
  bool ok = db.open(path, false, msg);
  if (ok) {
    sqlite3_busy_timeout(db.handle(), kBusyTimeoutMs);
    ok = db.exec("SELECT count(*) FROM sqlite_master", msg);
  }
  db.close();
  if (!ok)
    throw Error(
        fmt::format("{} holds an interrupted write (a writer died during a flush) that "
                    "must be rolled back from {}-journal, and that failed: {}; run sonde "
                    "where the file is writable",
                    path, path, msg));
  fmt::print(stderr,
             "sonde: rolled back an interrupted write to {} (a writer died during a "
             "flush; the profile is as of its last complete flush)\n",
             path);
}

// quick_check's report without its heading, on one line.
std::string one_line(std::string text) {
  constexpr std::string_view kHeading = "*** in database main ***";
  if (text.rfind(kHeading, 0) == 0) text.erase(0, kHeading.size());
  for (char& c : text) c = c == '\n' ? ' ' : c;
  text.erase(0, text.find_first_not_of(' '));
  return text;
}

// Up to this size every page is checked when a profile is opened (PRAGMA quick_check, about
// 0.06 s of CPU for 16 MiB here), so that damage is said even where the command would not read
// it; a larger file is checked page by page as it is read (cell_size_check), which catches
// damage wherever it could change the command's output. On a million nodes (63 MiB) the whole
// check cost 0.25 s of a 0.33 s `sonde report`.
constexpr std::int64_t kQuickCheckBytes = std::int64_t{16} << 20;

// Up to this size a profile still being written is read from a copy in memory (below); a
// larger one from a copy in a temporary file.
constexpr std::int64_t kLiveCopyBytes = std::int64_t{256} << 20;

// Beyond this size a live profile is read in place: its copy would hold the run's flushes off
// for seconds as the command's statements did (about 1 ms a MiB), and take as much space.
constexpr std::int64_t kLiveCopyMaxBytes = std::int64_t{4} << 30;

// A process without its end that runs still (on another host, or where /proc cannot say: taken
// to run): the file may still be written. A killed run's processes never end in its file, and
// every reader copied a large one again.
bool still_written(const ProfileFile& file) {
  if (!file.has_table("processes")) return false;
  auto st = file.prepare("SELECT pid, host, started_ns FROM processes WHERE ended_ns IS NULL");
  while (st.step()) {
    std::string host = st.is_null(1) ? "" : st.text(1);
    if (!on_this_host(st.is_null(1) ? nullptr : host.c_str()) ||
        process_alive(pid_t(st.int64(0)), st.int64(2)))
      return true;
  }
  return false;
}

}  // namespace

ProfileFile::ProfileFile(std::string path) : path_(std::move(path)) {}
ProfileFile::~ProfileFile() = default;

void ProfileFile::fail(int rc, std::string_view what) const {
  const char* msg = db_.handle() ? sqlite3_errmsg(db_.handle()) : sqlite3_errstr(rc);
  switch (rc & 0xff) {
    case SQLITE_INTERRUPT:
      if (limit_ && limit_->tripped())
        throw Error(
            fmt::format("{}: a query stopped after {} million SQLite steps, far more "
                        "than any profile sonde writes needs; the file's data is not "
                        "as sonde writes it (damaged or made by hand?)",
                        path_, limit_->limit() / 1000000));
      break;
    case SQLITE_NOTADB:
      throw Error(fmt::format("{} is not a SQLite database (or its header is damaged)", path_));
    case SQLITE_CORRUPT:
      throw Error(fmt::format("{} is corrupt or truncated (SQLite: {})", path_, msg));
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      throw Error(
          fmt::format("{} stayed locked by a writer for {} ms; try again", path_, kBusyTimeoutMs));
    case SQLITE_IOERR:
      throw Error(fmt::format("cannot read {}: I/O error ({})", path_, msg));
    default:
      break;
  }
  // Any other failure, and an interrupt sonde's work limit did not cause: SQLite's own words.
  if (what.empty()) throw Error(fmt::format("{}: {}", path_, msg));
  throw Error(fmt::format("{}: {}", what, msg));
}

// A call tree's parent links each go to a node written before it (libsonde gives ids in the
// order the nodes were made, a parent first; merge keeps that order): a cycle must hold a link
// to the same or a later node. A file with one (not SQLite damage: quick_check passes it) had
// `tree --callers`, `view` and its server loop forever and the folded export take all memory
// (a red-team find); such links are followed whole here, once, and a cycle refused in one line.
bool ProfileFile::has_later_parent_links() const {
  return prepare("SELECT 1 FROM nodes WHERE parent_id >= node_id LIMIT 1").step();
}

void ProfileFile::check_tree_links() const {
  if (!has_later_parent_links()) return;  // every file sonde writes
  std::unordered_map<std::int64_t, std::int64_t> parent;
  auto all = prepare("SELECT node_id, parent_id FROM nodes WHERE parent_id IS NOT NULL");
  while (all.step()) parent.emplace(all.int64(0), all.int64(1));
  // 0 unseen, 1 on the walk under way, 2 known to reach a root.
  std::unordered_map<std::int64_t, char> state;
  std::vector<std::int64_t> walk;
  for (const auto& [start, _] : parent) {
    walk.clear();
    std::int64_t n = start;
    while (true) {
      char& st = state[n];
      if (st == 2) break;
      if (st == 1)
        throw Error(fmt::format(
            "{} is corrupt: its call tree's parent links form a cycle (through node {})", path_,
            n));
      st = 1;
      walk.push_back(n);
      auto up = parent.find(n);
      if (up == parent.end()) break;  // a root, or a parent no row holds
      n = up->second;
    }
    for (std::int64_t w : walk) state[w] = 2;
  }
}

ProfileFile ProfileFile::open(const std::string& path, bool check_pages) {
  std::int64_t size = check_readable(path);
  ProfileFile file = open_read_only(path);
  int rc =
      sqlite3_exec(file.db(), "SELECT 1 FROM sqlite_master LIMIT 1", nullptr, nullptr, nullptr);
  if (rc == SQLITE_READONLY_ROLLBACK) {
    file.db_.close();
    roll_back_journal(path);
    file = open_read_only(path);
  } else if ((rc & 0xff) == SQLITE_BUSY || (rc & 0xff) == SQLITE_LOCKED) {
    // Said now: the next statement would wait the timeout again (4 s against the 2 s said).
    file.fail(rc, "");
  }
  // SQLite finds a damaged page only when a query reads it: a report could succeed on a file
  // whose other tables are lost.
  file.exec("PRAGMA cell_size_check = ON");
  if (check_pages && size <= kQuickCheckBytes) {
    auto check = file.prepare("PRAGMA quick_check(1)");
    if (check.step() && check.text(0) != "ok")
      throw Error(
          fmt::format("{} is corrupt (SQLite's quick_check: {})", path, one_line(check.text(0))));
  }

  // Reading sqlite_master is the first real page access: a text file or truncated copy fails here.
  if (!file.has_table("meta"))
    throw Error(
        fmt::format("{} is a SQLite database but not a sonde profile (no meta table)", path));
  auto st = file.prepare("SELECT value FROM meta WHERE key = 'schema_version'");
  if (!st.step())
    throw Error(
        fmt::format("{} is a SQLite database but not a sonde profile (no schema_version)", path));
  std::string text = st.text(0);
  int version = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), version);
  if (ec != std::errc{} || end != text.data() + text.size() || version < 1)
    throw Error(fmt::format("{} has an invalid schema_version '{}'", path, text));
  if (version > kSchemaVersion)
    throw Error(
        fmt::format("{} has schema version {}; this sonde reads up to version {}: "
                    "use a newer sonde",
                    path, version, kSchemaVersion));
  if (version < 3)
    throw Error(fmt::format(
        "{} has schema version {}, written by an older sonde; this sonde reads "
        "versions 3 to {} (its views and tables differ: ranks, comm_ops, comm_overlap since 3, "
        "shapes.threads since 2): profile the run again",
        path, version, kSchemaVersion));
  // The tables every reader reads: one dropped by hand read "SQL error: no such table: nodes"
  // (a red-team nit), where other damage gets a line naming the file.
  std::string missing;
  for (const char* table : {"runs", "processes", "threads", "routines", "nodes"})
    if (!file.has_table(table)) missing += (missing.empty() ? "" : ", ") + std::string(table);
  if (!missing.empty())
    throw Error(fmt::format("{} is not a whole sonde profile: its table{} {} {} missing", path,
                            missing.find(',') == std::string::npos ? "" : "s", missing,
                            missing.find(',') == std::string::npos ? "is" : "are"));
  // A profile still being written is read from a copy in memory, taken in one read transaction
  // (about 1 ms a MiB): a command's statements each held the file's shared lock while they ran,
  // 3 to 9 s on a file of 11k threads, and the program's flushes waited behind them or failed,
  // and the threads that had ended, freed only once written, piled up (1.2 GB against 139 MB in
  // a red-team run starting and ending threads, readers running `sonde report` on it). A file
  // over kLiveCopyBytes is copied into a temporary file (SQLite's: under $SQLITE_TMPDIR or
  // $TMPDIR, else /var/tmp or /tmp, gone when the command ends; up to kLiveCopyMaxBytes): read in
  // place, a 440 MB one's 33-46 s reports held the run's flushes off, its ended threads piled up
  // to 8.4 GB, and the exit flushes of 16 of 60 DataLoader workers gave up (a red team's).
  bool read_while_written = still_written(file);  // until a copy is read instead
  if (size <= kLiveCopyMaxBytes && read_while_written) {
    ProfileFile copy(path);
    std::string error;
    if (copy.db_.open(size <= kLiveCopyBytes ? ":memory:" : "", true, error)) {
      sqlite3_backup* b = sqlite3_backup_init(copy.db(), "main", file.db(), "main");
      int done = b ? sqlite3_backup_step(b, -1) : SQLITE_ERROR;
      if (b) sqlite3_backup_finish(b);
      if (done == SQLITE_DONE) {
        copy.limit_work();
        copy.exec("PRAGMA cell_size_check = ON");
        file = std::move(copy);
        read_while_written = false;
      }  // else read in place, as before: the copy is an optimisation, never a failure
    }
  }
  use_own_views(file, version, !read_while_written);
  file.schema_version_ = version;
  return file;
}

ProfileFile ProfileFile::open_read_only(const std::string& path) {
  ProfileFile file(path);
  if (int rc = file.db_.open_readonly(path, kBusyTimeoutMs); rc != SQLITE_OK) file.fail(rc);
  file.limit_work();
  return file;
}

void ProfileFile::limit_work() { limit_ = std::make_unique<WorkLimit>(db_.handle()); }

bool ProfileFile::has_rows(std::string_view table) const {
  auto st = prepare(fmt::format("SELECT EXISTS (SELECT 1 FROM {})", table));
  return st.step() && st.int64(0) != 0;
}

bool ProfileFile::has_table(std::string_view name) const {
  auto st = prepare("SELECT 1 FROM sqlite_master WHERE type IN ('table', 'view') AND name = ?");
  st.bind(1, name);
  return st.step();
}

void ProfileFile::exec(const std::string& sql) const {
  char* err = nullptr;
  int rc = sqlite3_exec(db_.handle(), sql.c_str(), nullptr, nullptr, &err);
  sqlite3_free(err);
  if (rc != SQLITE_OK) fail(rc);
}

Statement::Statement(const ProfileFile& file, std::string_view sql)
    : file_(&file), stmt_(file.db(), sql) {
  if (!stmt_.ok()) file.fail(stmt_.prepare_rc(), "SQL error");
  file.work_limit().statement_opened();
}

Statement::Statement(Statement&& other) noexcept
    : file_(other.file_), stmt_(std::move(other.stmt_)) {
  other.file_ = nullptr;
}

Statement::~Statement() {
  if (file_ != nullptr) file_->work_limit().statement_closed();
}

Statement& Statement::bind(int index, std::int64_t value) {
  stmt_.bind(index, static_cast<int64_t>(value));
  return *this;
}

Statement& Statement::bind(int index, std::string_view value) {
  stmt_.bind_copy(index, value);
  return *this;
}

bool Statement::step() {
  int rc = stmt_.step();
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  file_->fail(rc, "SQL error");
}

bool Statement::is_readonly() const { return stmt_.readonly(); }
int Statement::column_count() const { return stmt_.column_count(); }
std::string Statement::column_name(int col) const { return stmt_.column_name(col); }
bool Statement::is_null(int col) const { return stmt_.column_type(col) == SQLITE_NULL; }
std::int64_t Statement::int64(int col) const { return stmt_.column_int(col); }
double Statement::real(int col) const { return stmt_.column_double(col); }
std::string Statement::text(int col) const { return stmt_.column_text(col); }

Cell Statement::cell(int col) const {
  switch (stmt_.column_type(col)) {
    case SQLITE_INTEGER:
      return int64(col);
    case SQLITE_FLOAT:
      return real(col);
    case SQLITE_TEXT:
      return text(col);
    case SQLITE_BLOB:
      return fmt::format("<blob {} bytes>", stmt_.column_bytes(col));
    default:
      return std::monostate{};
  }
}

}  // namespace sonde::analyzers
