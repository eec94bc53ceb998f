// The routines table: shared by every process of the file, so a process looks before it
// inserts. Most of a process's routines are the wrappers' (277), registered in the same order by
// every process of a build, and the rest are new: both go in bulk, and only what another
// process wrote in between is looked up one at a time.
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

bool Store::write_routines(Database& db, RoutineRegistry& registry, std::string& error) {
  std::vector<const Routine*> added = registry.since(routines_.size());
  routines_.insert(routines_.end(), added.begin(), added.end());
  if (routine_ids_.size() >= routines_.size()) return true;
  return adopt_leading_routines(db, error) && insert_new_routines(db, error) &&
         insert_routines_one_by_one(db, error);
}

// While this process's routines have been rows 1, 2, ... of the file (the run's first process
// wrote the wrappers' first), the next ones are taken by position in one read, as long as they
// match: a joining process (a child) used to spend an INSERT and a SELECT on each.
bool Store::adopt_leading_routines(Database& db, std::string& error) {
  if (!routine_ids_.empty() && routine_ids_.back() != int64_t(routine_ids_.size())) return true;
  Statement lead(db.handle(),
                 "SELECT routine_id, name, kind, library, file, line FROM routines "
                 "WHERE routine_id > ? AND routine_id <= ? ORDER BY routine_id");
  if (!lead.ok()) {
    error = fmt::format("preparing statements: {}", db.message());
    return false;
  }
  lead.bind(1, int64_t(routine_ids_.size())).bind(2, int64_t(routines_.size()));
  while (lead.step() == SQLITE_ROW) {
    int64_t id = int64_t(routine_ids_.size()) + 1;
    const Routine& r = *routines_[routine_ids_.size()];
    if (lead.column_int(0) != id || lead.column_text(1) != r.name ||
        lead.column_text(2) != r.kind || lead.column_text(3) != r.library ||
        lead.column_text(4) != r.file || lead.column_int(5) != int64_t(r.line))
      break;
    routine_ids_.push_back(id);
  }
  lead.reset();
  return true;
}

// The rest, up to 64 to a plain INSERT (the last one holding what remains): the flush holds the
// write lock, so each row takes the largest id + 1, in order. A routine another process wrote in
// between violates the UNIQUE constraint, SQLite undoes that statement, and from there they go
// one by one. The remainder went one by one too, which took 1.1 ms of every first process's exit
// flush for the wrappers' last 30 routines, against 0.7 ms for the 256 before them.
bool Store::insert_new_routines(Database& db, std::string& error) {
  if (routines_.size() == routine_ids_.size()) return true;
  int64_t next = 0;
  if (!one_int(db, "SELECT coalesce(max(routine_id), 0) FROM routines", next, "recording routines",
               error))
    return false;
  ++next;
  std::optional<Statement> many;
  int prepared_rows = 0;
  while (size_t left = routines_.size() - routine_ids_.size()) {
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
    size_t first = routine_ids_.size();
    for (int r = 0; r < rows; ++r)
      bind_routine(*many, 1 + r * kRoutineColumns, *routines_[first + size_t(r)]);
    int rc = many->step();
    if ((rc & 0xff) == SQLITE_CONSTRAINT) return true;  // one of them is there already
    if (rc != SQLITE_DONE) {
      error = fmt::format("recording routines: {}", db.message());
      return false;
    }
    if (!took_rowids(db, next + rows - 1, "routine", error)) {
      error = "recording routines: " + error;
      return false;
    }
    for (int r = 0; r < rows; ++r) routine_ids_.push_back(next++);
  }
  return true;
}

// One statement for a new routine; the lookup only when another process inserted it.
bool Store::insert_routines_one_by_one(Database& db, std::string& error) {
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
  for (size_t i = routine_ids_.size(); i < routines_.size(); ++i) {
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
    routine_ids_.push_back(source->column_int(0));
    source->reset();
    if (source == &ins) find.reset();
  }
  return true;
}

}  // namespace sonde
