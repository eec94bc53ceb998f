// The call tree's rows. A first flush inserts one row per call path, and 99,000 of them took
// 171 ms of CPU one statement each (the statement's run, reset and bindings per row, and index
// updates in no particular order). New rows get their node_id here, in rowid order, so a row's
// parent is known before it is written, and go 64 to a statement.
#include <fmt/format.h>

#include <string>

#include "store/sqlite_db.hpp"
#include "store/store.hpp"

namespace sonde {

namespace {

constexpr int kColumns = 12;
constexpr int kRowsPerInsert = 64;  // 768 parameters: SQLite allows 32,766

std::string insert_sql(int rows) {
  std::string sql =
      "INSERT INTO nodes (node_id, thread_id, parent_id, routine_id, depth, recursive, calls, "
      "subrs, incl_ns, excl_ns, flops, bytes) VALUES ";
  for (int r = 0; r < rows; ++r)
    sql += r == 0 ? "(?,?,?,?,?,?,?,?,?,?,?,?)" : ",(?,?,?,?,?,?,?,?,?,?,?,?)";
  return sql;
}

bool one_int(Database& db, const char* sql, int64_t& value, std::string& error) {
  Statement s(db.handle(), sql);
  if (!s.ok() || s.step() != SQLITE_ROW) {
    error = fmt::format("reading the call tree: {}", db.message());
    return false;
  }
  value = s.column_int(0);
  s.reset();
  return true;
}

// The rows' children name them as parents by the ids given: a row that took another id (never
// seen: only a table at the largest rowid picks at random) fails the flush, rolled back.
bool took_ids(Database& db, int64_t last, std::string& error) {
  int64_t got = sqlite3_last_insert_rowid(db.handle());
  if (got == last) return true;
  error = fmt::format("writing the call tree: node {} was written as {}", last, got);
  return false;
}

}  // namespace

struct Store::NewNode {
  int64_t id, thread_id, parent_id, routine_id, depth, recursive, calls, subrs, incl_ns, excl_ns;
  double flops, bytes;
};

bool Store::insert_nodes(Database& db, std::vector<NewNode>& rows, std::string& error) {
  auto bind = [](Statement& s, int first, const NewNode& n) {
    // node_id NULL: SQLite takes the largest + 1, the id given, without the seek that checks
    // a given id is free (8 ms of 99,000 rows); each statement's last id is checked below.
    s.bind_null(first).bind(first + 1, n.thread_id);
    if (n.parent_id != 0)
      s.bind(first + 2, n.parent_id);
    else
      s.bind_null(first + 2);
    s.bind(first + 3, n.routine_id).bind(first + 4, n.depth).bind(first + 5, n.recursive);
    s.bind(first + 6, n.calls).bind(first + 7, n.subrs).bind(first + 8, n.incl_ns);
    s.bind(first + 9, n.excl_ns).bind(first + 10, n.flops).bind(first + 11, n.bytes);
  };
  size_t done = 0;
  if (rows.size() >= size_t(kRowsPerInsert)) {
    Statement many(db.handle(), insert_sql(kRowsPerInsert));
    if (!many.ok()) {
      error = fmt::format("preparing statements: {}", db.message());
      return false;
    }
    for (; rows.size() - done >= size_t(kRowsPerInsert); done += kRowsPerInsert) {
      for (int r = 0; r < kRowsPerInsert; ++r) bind(many, 1 + r * kColumns, rows[done + r]);
      if (many.step() != SQLITE_DONE) {
        error = fmt::format("writing the call tree: {}", db.message());
        return false;
      }
      if (!took_ids(db, rows[done + kRowsPerInsert - 1].id, error)) return false;
    }
  }
  if (done < rows.size()) {
    Statement one(db.handle(), insert_sql(1));
    for (; done < rows.size(); ++done) {
      bind(one, 1, rows[done]);
      if (!one.ok() || one.step() != SQLITE_DONE) {
        error = fmt::format("writing the call tree: {}", db.message());
        return false;
      }
      if (!took_ids(db, rows[done].id, error)) return false;
    }
  }
  rows.clear();
  return true;
}

bool Store::write_nodes(Database& db, const ThreadSnapshot& t, ThreadIds& ids, std::string& error) {
  ids.nodes.resize(t.nodes.size(), 0);
  ids.written.resize(t.nodes.size(), {0, 0});
  std::vector<NewNode> added;
  Statement upd(db.handle(),
                "UPDATE nodes SET calls=?, subrs=?, incl_ns=?, excl_ns=?, flops=?, bytes=? "
                "WHERE node_id=?");
  if (!upd.ok()) {
    error = fmt::format("preparing statements: {}", db.message());
    return false;
  }
  for (const NodeRow& n : t.nodes) {
    // Inherited across fork and never run here. A generator first resumed under this path
    // has no call of its own but has time, and children that need it as their parent.
    if (n.calls == 0 && n.incl_ns == 0 && n.index != 0) continue;
    int64_t& id = ids.nodes[n.index];
    auto& written = ids.written[n.index];
    if (id != 0 && written == std::pair<uint64_t, int64_t>{n.calls, n.incl_ns}) continue;
    written = {n.calls, n.incl_ns};
    if (id != 0) {
      upd.bind(1, int64_t(n.calls)).bind(2, int64_t(n.subrs)).bind(3, n.incl_ns);
      upd.bind(4, n.excl_ns).bind(5, double(n.flops)).bind(6, double(n.bytes));
      upd.bind(7, id);
      if (upd.step() != SQLITE_DONE) {
        error = fmt::format("updating the call tree: {}", db.message());
        return false;
      }
      continue;
    }
    // The flush holds the write lock: no other process can take the ids after the largest.
    if (next_node_id_ == 0) {
      int64_t last = 0;
      if (!one_int(db, "SELECT coalesce(max(node_id), 0) FROM nodes", last, error)) return false;
      next_node_id_ = last + 1;
    }
    id = next_node_id_++;
    int64_t parent = n.index == 0 ? 0 : ids.nodes[n.parent];
    added.push_back({id, ids.thread_id, parent, routine_ids_.at(n.routine), int64_t(n.depth),
                     int64_t(n.recursive), int64_t(n.calls), int64_t(n.subrs), n.incl_ns, n.excl_ns,
                     double(n.flops), double(n.bytes)});
  }
  return insert_nodes(db, added, error);
}

}  // namespace sonde
