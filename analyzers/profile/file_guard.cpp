#include "profile/file_guard.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

#include "profile/profile_file.hpp"
#include "schema_sql.hpp"  // generated from store_schema.sql and store_views.sql

namespace sonde::analyzers {
namespace {

// Steps between two calls of the progress handler: its cost is lost in them.
constexpr int kStepsPerCall = 1000;

// The names after each `head` in the schema's text ("CREATE VIEW IF NOT EXISTS "), with the
// text from the name to the end of its statement.
struct Definition {
  std::string_view name;
  std::string_view body;  // " AS SELECT ..." for a view
};
std::vector<Definition> definitions(std::string_view head) {
  std::vector<Definition> out;
  const std::string_view schema = kSchemaSql;
  for (std::size_t at = schema.find(head); at != std::string_view::npos;
       at = schema.find(head, at + 1)) {
    std::size_t name_at = at + head.size();
    std::size_t name_end = schema.find_first_of(" (\n", name_at);
    std::size_t end = schema.find(";\n", name_at);
    if (name_end == std::string_view::npos || end == std::string_view::npos) break;
    out.push_back(
        {schema.substr(name_at, name_end - name_at), schema.substr(name_end, end - name_end)});
  }
  return out;
}

// The waits' views: a statement of hotspots read `waits` five times (through thread_times,
// waited_nodes and wait_cuts twice), each a scan of every node, SQLite expanding a view at each
// use; made once, as temp tables of the views' own SELECTs, a report on 200 DataLoader workers'
// file (103k nodes) took 0.22 s where it took 0.39. Only where the file names a wait routine
// (else each view reads no node), and its parent links all lead to a root: a cycle would run
// wait_cuts' walk up the links to the work limit at every open, where the readers that follow
// the links say "corrupt" first (ProfileFile::check_tree_links).
constexpr std::string_view kComputedOnce[] = {"waits", "waited_nodes", "wait_cuts"};

bool compute_once(const ProfileFile& file) {
  auto waits = file.prepare("SELECT EXISTS (SELECT 1 FROM wait_routines)");
  if (!waits.step() || waits.int64(0) == 0) return false;
  return !file.has_later_parent_links();
}

}  // namespace

const char* const kLegacyDtypeSql =
    "(CASE WHEN r.kind = 'blas' AND (r.name GLOB '*gemm*' OR r.name GLOB '*syrk*' "
    "OR r.name GLOB '*gemv*') THEN CASE substr(r.name, CASE WHEN r.name GLOB 'cblas_*' "
    "THEN 7 ELSE 1 END, 1) WHEN 's' THEN 'f32' WHEN 'd' THEN 'f64' WHEN 'c' THEN 'c64' "
    "WHEN 'z' THEN 'c128' END END)";
const char* const kLegacyRoleSql =
    "(CASE WHEN r.kind <> 'cuda' THEN NULL "
    "WHEN r.name GLOB '*HtoD*' OR r.name GLOB '*DtoH*' THEN 'copy' "
    "WHEN r.name GLOB '*Synchronize*' THEN 'sync' WHEN r.name GLOB '*Launch*' THEN 'launch' "
    "ELSE 'other' END)";

WorkLimit::WorkLimit(sqlite3* db, std::int64_t limit) : db_(db), limit_(limit) {
  sqlite3_progress_handler(db_, kStepsPerCall, &WorkLimit::on_progress, this);
}

void WorkLimit::statement_opened() {
  if (open_++ == 0) {
    steps_ = 0;
    tripped_ = false;
  }
}

void WorkLimit::statement_closed() {
  if (open_ > 0) --open_;
}

int WorkLimit::on_progress(void* self) {
  auto* w = static_cast<WorkLimit*>(self);
  w->steps_ += kStepsPerCall;
  if (w->limit_ <= 0 || w->steps_ <= w->limit_) return 0;
  w->tripped_ = true;
  return 1;
}

void use_own_views(const ProfileFile& file, int version, bool unchanging) {
  // A table of the schema that the file makes a view (or a virtual table) would run its SQL
  // under this sonde's views; an older file may lack a table, never hold another kind.
  for (const Definition& table : definitions("CREATE TABLE IF NOT EXISTS ")) {
    Statement st = file.prepare(
        "SELECT type, COALESCE(sql LIKE 'CREATE VIRTUAL%', 0) FROM main.sqlite_master "
        "WHERE name = ?1 COLLATE NOCASE");
    st.bind(1, table.name);
    if (st.step() && (st.text(0) != "table" || st.int64(1) != 0))
      throw Error(fmt::format(
          "{} is not a profile as sonde writes it: its {} is a {} where "
          "sonde writes a table (a file made or changed by hand?)",
          file.path(), table.name, st.text(0) == "table" ? "virtual table" : st.text(0)));
  }
  if (version <= 10) {
    // threads.cpu_ns came with version 11: thread_times judges such a file's threads on their
    // measured calls alone.
    file.exec(
        "CREATE TEMP VIEW threads AS SELECT thread_id, process_id, seq, tid, name, started_ns, "
        "ended_ns, ftz, daz, NULL AS cpu_ns FROM main.threads");
  }
  if (version <= 8) {
    // The facts' columns came with version 9: a temp view of the same name stands in front of
    // the table, so every reader (and every view below) reads them, guessed as before.
    file.exec(fmt::format(
        "CREATE TEMP VIEW routines AS SELECT r.routine_id AS routine_id, r.name AS name, "
        "r.kind AS kind, r.library AS library, r.file AS file, r.line AS line, {} AS dtype, "
        "{} AS role FROM main.routines r",
        kLegacyDtypeSql, kLegacyRoleSql));
  }
  if (version <= 7) {
    // No writer kept per-routine sums before version 8: an empty table of the schema's, and
    // thread_routine_totals sums every thread from its nodes.
    for (const Definition& table : definitions("CREATE TABLE IF NOT EXISTS ")) {
      if (table.name == "thread_routine_sums")
        file.exec(fmt::format("CREATE TEMP TABLE {}{}", table.name, table.body));
    }
  }
  bool once = false;
  for (const Definition& view : definitions("CREATE VIEW IF NOT EXISTS ")) {
    if (view.name == "gpu_activity_ns" && version <= 4) {
      // Versions 3 and 4 hold only timed GPU rows (schema_version.hpp).
      file.exec(
          "CREATE TEMP VIEW gpu_activity_ns AS SELECT activity_id, node_id, kind, "
          "end_ns - start_ns AS ns FROM gpu_activity");
      continue;
    }
    // (Asked at `waits`, the first of them: wait_routines, which it reads, is made by then.)
    if (view.name == kComputedOnce[0]) once = unchanging && compute_once(file);
    bool computed = once && std::find(std::begin(kComputedOnce), std::end(kComputedOnce),
                                      view.name) != std::end(kComputedOnce);
    file.exec(
        fmt::format("CREATE TEMP {} {}{}", computed ? "TABLE" : "VIEW", view.name, view.body));
  }
  if (version <= 5) {
    // Files before version 6 know no graph node origins (gpu_activity.origin_node_id): their
    // views of them are empty. op_shapes is not there either: its readers look for the table.
    file.exec("DROP VIEW temp.gpu_graph_origins");
    file.exec(
        "CREATE TEMP VIEW gpu_graph_origins AS SELECT NULL AS node_id, 0 AS records, 0 AS ns "
        "LIMIT 0");
    file.exec("DROP VIEW temp.gpu_graph_kernels");
    file.exec(
        "CREATE TEMP VIEW gpu_graph_kernels AS SELECT '' AS kind, '' AS name, '' AS origin_path, "
        "'' AS call_path, 0 AS records, 0.0 AS time_s LIMIT 0");
  }
}

}  // namespace sonde::analyzers
