// The routines table: shared by every process of the file, so a process looks before it
// inserts. A routine's row is written by the first flush whose data names it: of the wrappers'
// 299 routines, registered in every process, a short one calls a few, and writing them all was
// 0.4-0.6 ms of every new file's first flush. New ones go in bulk; what other processes wrote
// is read once (after what was read before) and matched by identity.
#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <string>

#include "store/sqlite_db.hpp"
#include "store/store.hpp"

namespace sonde {

namespace {

constexpr int kRoutineColumns = 7;
constexpr int kRoutinesPerInsert = 64;

constexpr const char* kInsertHead =
    "INSERT INTO routines (name, kind, library, file, line, dtype, role)";

// The routine's identity, then its facts: NULL where the wrapper states none.
void bind_routine(Statement& s, int first, const Routine& r) {
  s.bind(first, r.name).bind(first + 1, r.kind).bind(first + 2, r.library);
  s.bind(first + 3, r.file).bind(first + 4, int64_t(r.line));
  if (r.dtype == DType::kNone)
    s.bind_null(first + 5);
  else
    s.bind(first + 5, std::string_view(dtype_name(r.dtype)));
  if (r.role.empty())
    s.bind_null(first + 6);
  else
    s.bind(first + 6, r.role);
}

// The identity alone, for the lookup of a routine another process wrote.
void bind_identity(Statement& s, const Routine& r) {
  s.bind(1, r.name).bind(2, r.kind).bind(3, r.library);
  s.bind(4, r.file).bind(5, int64_t(r.line));
}

}  // namespace

namespace {

// A row's identity, as the table's UNIQUE constraint has it: each part's length before it, so
// that no two identities share a key whatever their names hold.
std::string routine_key(std::string_view name, std::string_view kind, std::string_view library,
                        std::string_view file, int64_t line) {
  return fmt::format("{}:{}{}:{}{}:{}{}:{}{}", name.size(), name, kind.size(), kind, library.size(),
                     library, file.size(), file, line);
}

std::string routine_key(const Routine& r) {
  return routine_key(r.name, r.kind, r.library, r.file, r.line);
}

}  // namespace

bool Store::write_routines(Database& db, RoutineRegistry& registry, const FlushData& data,
                           std::string& error) {
  std::vector<const Routine*> added = registry.since(routines_.size());
  routines_.insert(routines_.end(), added.begin(), added.end());
  routine_ids_.resize(routines_.size(), 0);
  std::vector<RoutineId> missing = unwritten_routines(data);
  int64_t last = 0;  // the file's largest routine_id, which no other process moves meanwhile
  return missing.empty() || (find_file_routines(db, missing, last, error) &&
                             insert_new_routines(db, missing, last, error) &&
                             insert_routines_one_by_one(db, missing, error));
}

// The routines this flush's rows name (nodes, lines) that have no row id yet, in registry order.
std::vector<RoutineId> Store::unwritten_routines(const FlushData& data) const {
  std::vector<bool> named(routine_ids_.size(), false);
  auto name = [&](RoutineId r) {
    if (r < named.size() && routine_ids_[r] == 0) named[r] = true;
  };
  for (const ThreadSnapshot& t : data.threads) {
    for (const NodeRow& n : t.nodes) name(n.routine);
    for (const LineRow& l : t.lines) name(l.routine);
  }
  std::vector<RoutineId> missing;
  for (size_t r = 0; r < named.size(); ++r)
    if (named[r]) missing.push_back(RoutineId(r));
  return missing;
}

// Rows other processes wrote since this one last looked (the flush holds the write lock, so
// none appear while it runs), kept by identity; the missing routines among them take their ids.
bool Store::find_file_routines(Database& db, std::vector<RoutineId>& missing, int64_t& last,
                               std::string& error) {
  if (!one_int(db, "SELECT coalesce(max(routine_id), 0) FROM routines", last, "recording routines",
               error))
    return false;
  if (last > file_routines_read_) {
    Statement rows(db.handle(),
                   "SELECT routine_id, name, kind, library, file, line FROM routines "
                   "WHERE routine_id > ?");
    if (!rows.ok()) {
      error = fmt::format("preparing statements: {}", db.message());
      return false;
    }
    rows.bind(1, file_routines_read_);
    int rc;
    while ((rc = rows.step()) == SQLITE_ROW) {
      file_routines_.emplace(
          routine_key(rows.column_text(1), rows.column_text(2), rows.column_text(3),
                      rows.column_text(4), rows.column_int(5)),
          rows.column_int(0));
    }
    if (rc != SQLITE_DONE) {
      error = fmt::format("recording routines: {}", db.message());
      return false;
    }
    file_routines_read_ = last;
  }
  if (file_routines_.empty()) return true;
  std::erase_if(missing, [&](RoutineId r) {
    auto it = file_routines_.find(routine_key(*routines_[r]));
    if (it == file_routines_.end()) return false;
    routine_ids_[r] = it->second;
    return true;
  });
  return true;
}

// The rest, up to 64 to a plain INSERT (the last one holding what remains): the flush holds the
// write lock, so each row takes the largest id + 1, in order. A row of the same identity that
// find_file_routines did not see (none is known to escape it: the registry interns by the same
// identity, and no other process writes while the lock is held) would violate the UNIQUE
// constraint: SQLite undoes that statement, and from there they go one by one. The remainder went
// one by one too, which took 1.1 ms of every first process's exit flush for the wrappers' last 30
// routines, against 0.7 ms for the 256 before them.
bool Store::insert_new_routines(Database& db, std::vector<RoutineId>& missing, int64_t last,
                                std::string& error) {
  if (missing.empty()) return true;
  int64_t next = last + 1;
  std::optional<Statement> many;
  int prepared_rows = 0;
  size_t done = 0;
  while (size_t left = missing.size() - done) {
    int rows = int(std::min(left, size_t(kRoutinesPerInsert)));
    if (rows != prepared_rows) {
      many.reset();
      many.emplace(db.handle(), insert_rows_sql(kInsertHead, kRoutineColumns, rows));
      prepared_rows = rows;
      if (!many->ok()) {
        error = fmt::format("preparing statements: {}", db.message());
        return false;
      }
    }
    for (int r = 0; r < rows; ++r)
      bind_routine(*many, 1 + r * kRoutineColumns, *routines_[missing[done + size_t(r)]]);
    int rc = many->step();
    if ((rc & 0xff) == SQLITE_CONSTRAINT) break;  // one of them is there already
    if (rc != SQLITE_DONE) {
      error = fmt::format("recording routines: {}", db.message());
      return false;
    }
    if (!took_rowids(db, next + rows - 1, "routine", error)) {
      error = "recording routines: " + error;
      return false;
    }
    for (int r = 0; r < rows; ++r) routine_ids_[missing[done++]] = next++;
  }
  missing.erase(missing.begin(), missing.begin() + std::ptrdiff_t(done));
  // This process's own rows are read again by nobody: the next look starts after them.
  file_routines_read_ = std::max(file_routines_read_, next - 1);
  return true;
}

// One statement for a new routine; the lookup only when another process inserted it.
bool Store::insert_routines_one_by_one(Database& db, const std::vector<RoutineId>& missing,
                                       std::string& error) {
  if (missing.empty()) return true;
  sqlite3* h = db.handle();
  Statement ins(h, insert_rows_sql(kInsertHead, kRoutineColumns, 1) +
                       " ON CONFLICT DO NOTHING RETURNING routine_id");
  Statement find(h,
                 "SELECT routine_id FROM routines WHERE name=? AND kind=? AND library=? "
                 "AND file=? AND line=?");
  if (!ins.ok() || !find.ok()) {
    error = fmt::format("preparing statements: {}", db.message());
    return false;
  }
  for (RoutineId i : missing) {
    const Routine& r = *routines_[i];
    bind_routine(ins, 1, r);
    bind_identity(find, r);
    Statement* source = &ins;
    int rc = ins.step();
    if (rc == SQLITE_DONE) {
      source = &find;
      rc = find.step();
    }
    if (rc != SQLITE_ROW) {
      error = fmt::format("recording routines: {}", db.message());
      return false;
    }
    routine_ids_[i] = source->column_int(0);
    source->reset();
    if (source == &ins) find.reset();
  }
  return true;
}

}  // namespace sonde
