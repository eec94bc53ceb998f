#include "profile/query.hpp"

#include <fmt/format.h>
#include <sqlite3.h>

#include <set>
#include <string>

namespace sonde::analyzers {

Table run_query(const ProfileFile& file, const std::string& sql) {
  // The connection is already read-only; query_only also stops writes to TEMP tables.
  file.exec("PRAGMA query_only = ON");
  Table result;
  const char* rest = sql.c_str();
  const char* end = rest + sql.size();
  while (rest < end) {
    sqlite3_stmt* raw = nullptr;
    const char* tail = nullptr;
    int rc = sqlite3_prepare_v2(file.db(), rest, static_cast<int>(end - rest), &raw, &tail);
    if (rc != SQLITE_OK) file.fail(rc, "SQL error");
    rest = tail;
    if (raw == nullptr) continue;  // only blanks or a comment were left
    std::string text = sqlite3_sql(raw);
    sqlite3_finalize(raw);
    Statement st = file.prepare(text);
    if (!st.is_readonly())
      throw Error(
          fmt::format("refusing to write: {} is opened read-only, and this statement "
                      "would modify it",
                      file.path()));
    Table table;
    // The user's own SQL: its numbers as stored (fixed decimals printed 1e-9 as 0.000000).
    // A name given twice (t.name, r.name of a join) keys its later columns name:1, name:2:
    // JSON's rows, objects keyed by name, kept the last alone (a red-team find).
    std::set<std::string> keys;
    for (int c = 0; c < st.column_count(); ++c) {
      std::string name = st.column_name(c), key = name;
      for (int n = 1; !keys.insert(key).second; ++n) key = fmt::format("{}:{}", name, n);
      table.columns.push_back({name, key, Column::kAsStored});
    }
    while (st.step()) {
      std::vector<Cell> row;
      for (int c = 0; c < st.column_count(); ++c) row.push_back(st.cell(c));
      table.rows.push_back(std::move(row));
    }
    if (!table.columns.empty()) result = std::move(table);
  }
  return result;
}

}  // namespace sonde::analyzers
