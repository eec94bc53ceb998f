#include "programs/previous_profile.hpp"

#include <fmt/format.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "profile/process_alive.hpp"
#include "profile/profile_file.hpp"

namespace sonde::analyzers {
namespace {

constexpr const char* kSiblings[] = {"-journal", "-wal", "-shm"};

bool is_regular(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

bool exists(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0;
}

// What sonde needs to know of the file at the output before moving it.
struct Found {
  bool profile = false;    // a SQLite file whose meta table names a schema_version
  bool processes = false;  // ... with a process row (written by the first flush)
  pid_t live_writer = 0;   // a process of it on this host, not ended and alive (0: none)
};

Found look_at(const std::string& path) {
  Found found;
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOFOLLOW, nullptr) !=
      SQLITE_OK) {
    sqlite3_close(db);
    return found;
  }
  auto rows = [&](const char* sql, auto&& each) {
    sqlite3_stmt* st = nullptr;
    if (sqlite3_prepare_v2(db, sql, -1, &st, nullptr) == SQLITE_OK)
      while (sqlite3_step(st) == SQLITE_ROW) each(st);
    sqlite3_finalize(st);
  };
  rows("SELECT 1 FROM meta WHERE key = 'schema_version'",
       [&](sqlite3_stmt*) { found.profile = true; });
  if (found.profile)
    rows("SELECT 1 FROM processes LIMIT 1", [&](sqlite3_stmt*) { found.processes = true; });
  if (found.processes)
    rows("SELECT pid, host, started_ns FROM processes WHERE ended_ns IS NULL",
         [&](sqlite3_stmt* st) {
           pid_t pid = pid_t(sqlite3_column_int64(st, 0));
           const auto* h = reinterpret_cast<const char*>(sqlite3_column_text(st, 1));
           if (on_this_host(h) && found.live_writer == 0 && pid > 0 && pid != ::getpid() &&
               process_alive(pid, sqlite3_column_int64(st, 2)))
             found.live_writer = pid;
         });
  sqlite3_close(db);
  return found;
}

void move(const std::string& from, const std::string& to) {
  if (::rename(from.c_str(), to.c_str()) != 0)
    throw Error(fmt::format("cannot keep the previous profile {} as {}: {}", from, to,
                            std::strerror(errno)));
}

}  // namespace

PreviousProfile keep_previous_profile(const std::string& output) {
  if (!is_regular(output)) return PreviousProfile::none;
  Found found = look_at(output);
  if (!found.profile) return PreviousProfile::none;
  if (!found.processes) return PreviousProfile::not_started;
  if (found.live_writer != 0)
    throw Error(
        fmt::format("{} is still being written by process {} of its run; use -o for "
                    "another file (or --force once that process has ended)",
                    output, found.live_writer));
  std::string old = output + ".old";
  if (exists(old) && !is_regular(old))
    throw Error(
        fmt::format("cannot keep the previous profile {} as {}: that is not a regular "
                    "file; use --force to replace {} or -o for another file",
                    output, old, output));
  // The .old's own journal would be replayed into the profile moved over it.
  for (const char* suffix : kSiblings) {
    std::string stale = old + suffix;
    if (::unlink(stale.c_str()) != 0 && errno != ENOENT)
      throw Error(fmt::format("cannot remove {}: {}", stale, std::strerror(errno)));
  }
  move(output, old);
  for (const char* suffix : kSiblings)
    if (exists(output + suffix)) move(output + suffix, old + suffix);
  return PreviousProfile::kept;
}

}  // namespace sonde::analyzers
