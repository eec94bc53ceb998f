#pragma once
// The call tree's statements of one flush (store_nodes.cpp), prepared once for all its threads:
// a thread per request ending by the thousand spent a fifth of the flush preparing the same
// four statements for each thread again.

#include <array>
#include <cstdint>
#include <optional>
#include <string>

#include "store/sqlite_db.hpp"

namespace sonde {

// One new row of `nodes`, its node_id given in creation order (parents before their children).
struct NewNode {
  int64_t id, thread_id, parent_id, routine_id, depth, recursive, calls, subrs, incl_ns, excl_ns;
  double flops, bytes;
};

class NodeStatements {
 public:
  explicit NodeStatements(Database& db);
  // New rows as they come, 64 to a statement: the first flush used to gather all of them
  // first, and 99,000 rows (9.5 MB, grown by doubling) cost about a third of its time in
  // copies and, on a VM, page faults.
  bool add(const NewNode& n, std::string& error);
  // What is left of a thread's new rows, a statement each.
  bool finish(std::string& error);

  // Checked with the flush's others (store.cpp ThreadStatements); the bulk inserts are
  // prepared at their first use.
  Statement update;                          // a written row whose figures moved
  Statement put_sums;                        // a row of thread_routine_sums, inserted or replaced
  static constexpr int kRowsPerInsert = 64;  // 768 parameters: SQLite allows 32,766

 private:
  bool run(Statement& s, int64_t last_id, std::string& error);
  Statement* prepared(std::optional<Statement>& s, int rows, std::string& error);

  Database& db_;
  std::optional<Statement> many_, one_;
  std::array<NewNode, kRowsPerInsert> batch_;
  int size_ = 0;
};

}  // namespace sonde
