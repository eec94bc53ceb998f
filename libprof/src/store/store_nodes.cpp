// The call tree's rows. A first flush inserts one row per call path, and 99,000 of them took
// 171 ms of CPU one statement each (the statement's run, reset and bindings per row, and index
// updates in no particular order). New rows get their node_id here, in rowid order, so a row's
// parent is known before it is written, and go 64 to a statement as they come.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <optional>
#include <string>

#include "store/node_statements.hpp"
#include "store/sqlite_db.hpp"
#include "store/store.hpp"

namespace sonde {

namespace {

constexpr int kColumns = 12;

constexpr const char* kInsertHead =
    "INSERT INTO nodes (node_id, thread_id, parent_id, routine_id, depth, recursive, calls, "
    "subrs, incl_ns, excl_ns, flops, bytes)";

void bind_row(Statement& s, int first, const NewNode& n) {
  // node_id NULL: SQLite takes the largest + 1, the id given, without the seek that checks
  // a given id is free (8 ms of 99,000 rows); each statement's last id is checked in run().
  s.bind_null(first).bind(first + 1, n.thread_id);
  if (n.parent_id != 0)
    s.bind(first + 2, n.parent_id);
  else
    s.bind_null(first + 2);
  s.bind(first + 3, n.routine_id).bind(first + 4, n.depth).bind(first + 5, n.recursive);
  s.bind(first + 6, n.calls).bind(first + 7, n.subrs).bind(first + 8, n.incl_ns);
  s.bind(first + 9, n.excl_ns).bind(first + 10, n.flops).bind(first + 11, n.bytes);
}

}  // namespace

NodeStatements::NodeStatements(Database& db)
    : update(db.handle(),
             "UPDATE nodes SET calls=?, subrs=?, incl_ns=?, excl_ns=?, flops=?, bytes=? "
             "WHERE node_id=?"),
      put_sums(db.handle(),
               "INSERT INTO thread_routine_sums (thread_id, routine_id, root, calls, subrs, "
               "incl_ns, excl_ns, flops, bytes) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) "
               "ON CONFLICT (thread_id, routine_id, root) DO UPDATE SET calls = excluded.calls, "
               "subrs = excluded.subrs, incl_ns = excluded.incl_ns, excl_ns = excluded.excl_ns, "
               "flops = excluded.flops, bytes = excluded.bytes"),
      db_(db) {}

Statement* NodeStatements::prepared(std::optional<Statement>& s, int rows, std::string& error) {
  if (!s) s.emplace(db_.handle(), insert_rows_sql(kInsertHead, kColumns, rows));
  if (s->ok()) return &*s;
  error = fmt::format("preparing statements: {}", db_.message());
  return nullptr;
}

bool NodeStatements::add(const NewNode& n, std::string& error) {
  batch_[size_++] = n;
  if (size_ < kRowsPerInsert) return true;
  Statement* many = prepared(many_, kRowsPerInsert, error);
  if (many == nullptr) return false;
  size_ = 0;
  for (int r = 0; r < kRowsPerInsert; ++r) bind_row(*many, 1 + r * kColumns, batch_[r]);
  return run(*many, batch_[kRowsPerInsert - 1].id, error);
}

bool NodeStatements::finish(std::string& error) {
  if (size_ == 0) return true;
  Statement* one = prepared(one_, 1, error);
  if (one == nullptr) return false;
  for (int r = 0; r < size_; ++r) {
    bind_row(*one, 1, batch_[r]);
    if (!run(*one, batch_[r].id, error)) return false;
  }
  size_ = 0;
  return true;
}

bool NodeStatements::run(Statement& s, int64_t last_id, std::string& error) {
  if (s.step() != SQLITE_DONE) {
    error = fmt::format("writing the call tree: {}", db_.message());
    return false;
  }
  if (took_rowids(db_, last_id, "node", error)) return true;
  error = "writing the call tree: " + error;
  return false;
}

bool Store::write_nodes(Database& db, NodeStatements& st, const ThreadSnapshot& t, ThreadIds& ids,
                        std::string& error) {
  ids.nodes.resize(t.nodes.size(), 0);
  ids.written.resize(t.nodes.size(), {0, 0, 0});
  // Each routine's sums, over every node written (changed or not), in the same pass: in a
  // table by registry routine, with the routines touched listed (a table per thread, and a pass
  // over all of it, cost a thread that called three functions as much as one that called every
  // routine the process knows). The last write's are zeroed here, at the start, the one place
  // every write passes, a failed one's too: zeroed at the end, a write that failed midway (an
  // UPDATE refused by a full disk, std::bad_alloc) left them, a later flush added onto them,
  // and thread_routine_sums stayed wrong for the process's life (a review's: 20,780 calls where
  // the nodes held 169,450).
  for (RoutineId r : touched_) sums_[r] = RoutineSums{};
  touched_.clear();
  sums_.resize(routine_ids_.size());
  RoutineSums root;
  for (const NodeRow& n : t.nodes) {
    // Inherited across fork and never run here. A generator first resumed under this path
    // has no call of its own but has time, and children that need it as their parent.
    if (n.calls == 0 && n.incl_ns == 0 && n.index != 0) continue;
    RoutineSums* s = &root;
    if (n.index != 0) {
      s = &sums_[n.routine];
      if (*s == RoutineSums{}) touched_.push_back(n.routine);
    }
    s->calls += int64_t(n.calls);
    s->subrs += int64_t(n.subrs);
    if (!n.recursive) s->incl_ns += n.incl_ns;
    s->excl_ns += n.excl_ns;
    s->flops += double(n.flops);
    s->bytes += double(n.bytes);
    int64_t& id = ids.nodes[n.index];
    auto& written = ids.written[n.index];
    const ThreadIds::Written now{n.calls, n.incl_ns, n.excl_ns};
    if (id != 0 && written == now) continue;
    written = now;
    if (id != 0) {
      Statement& upd = st.update;
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
      if (!one_int(db, "SELECT coalesce(max(node_id), 0) FROM nodes", last, "reading the call tree",
                   error))
        return false;
      next_node_id_ = last + 1;
    }
    id = next_node_id_++;
    int64_t parent = n.index == 0 ? 0 : ids.nodes[n.parent];
    if (!st.add({id, ids.thread_id, parent, routine_ids_.at(n.routine), int64_t(n.depth),
                 int64_t(n.recursive), int64_t(n.calls), int64_t(n.subrs), n.incl_ns, n.excl_ns,
                 double(n.flops), double(n.bytes)},
                error))
      return false;
  }
  return st.finish(error) && write_routine_sums(db, st, t, ids, root, error);
}

bool Store::write_routine_sums(Database& db, NodeStatements& st, const ThreadSnapshot& t,
                               ThreadIds& ids, const RoutineSums& root, std::string& error) {
  Statement& put = st.put_sums;
  auto write = [&](RoutineId routine, bool is_root, const RoutineSums& s, RoutineSums& written) {
    if (s == written || (s == RoutineSums{} && !is_root)) return true;
    written = s;
    put.bind(1, ids.thread_id).bind(2, routine_ids_.at(routine)).bind(3, int64_t(is_root));
    put.bind(4, s.calls).bind(5, s.subrs).bind(6, s.incl_ns).bind(7, s.excl_ns);
    put.bind(8, s.flops).bind(9, s.bytes);
    if (put.step() != SQLITE_DONE) {
      error = fmt::format("writing the routine sums: {}", db.message());
      return false;
    }
    return true;
  };
  if (!t.nodes.empty() && !write(t.nodes[0].routine, true, root, ids.root_sums)) return false;
  // In routine order, as the whole table was written.
  std::sort(touched_.begin(), touched_.end());
  touched_.erase(std::unique(touched_.begin(), touched_.end()), touched_.end());
  for (RoutineId r : touched_) {
    if (!write(r, false, sums_[r], ids.sums[r])) return false;
  }
  return true;
}

}  // namespace sonde
