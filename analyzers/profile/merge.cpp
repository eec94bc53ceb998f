#include "profile/merge.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <regex>
#include <set>

#include "base/output_file.hpp"
#include "profile/file_guard.hpp"
#include "profile/launcher_file.hpp"
#include "profile/profile_file.hpp"
#include "schema_sql.hpp"  // generated from store_schema.sql and store_views.sql
#include "store/sqlite_db.hpp"

namespace sonde::analyzers {
namespace {

namespace fs = std::filesystem;

// The ids a table's columns hold: shifted by the output's largest id of their kind (an input's
// rows land after every row already merged), or mapped through the identity of a run (its
// uuid: the ranks of one job share it), routine or counter (shared by a file's processes).
enum class Id { kRun, kProcess, kThread, kNode, kNote, kShape, kActivity, kRoutine, kCounter };

struct IdOwner {
  Id id;
  const char* table;
  const char* column;
};
constexpr IdOwner kOwners[] = {
    {Id::kProcess, "processes", "process_id"}, {Id::kThread, "threads", "thread_id"},
    {Id::kNode, "nodes", "node_id"},           {Id::kNote, "notes", "note_id"},
    {Id::kShape, "shapes", "shape_id"},        {Id::kActivity, "gpu_activity", "activity_id"}};

struct TableSpec {
  const char* table;
  std::vector<std::pair<std::string, Id>> ids;  // the other columns are copied as they are
  bool keep_first = false;  // rows the ranks of one run repeat (its peaks): the first is kept
};

// In an order where every row a row names is copied before it. A table of the schema missing
// here is refused (check_tables_known), so a new table can never be dropped by a merge silently.
const std::vector<TableSpec>& table_specs() {
  static const std::vector<TableSpec> kSpecs = {
      {"processes",
       {{"process_id", Id::kProcess}, {"run_id", Id::kRun}, {"parent_process_id", Id::kProcess}}},
      {"run_info", {{"run_id", Id::kRun}, {"process_id", Id::kProcess}}},
      {"notes", {{"note_id", Id::kNote}, {"run_id", Id::kRun}, {"process_id", Id::kProcess}}},
      {"peaks", {{"run_id", Id::kRun}}, true},
      {"threads", {{"thread_id", Id::kThread}, {"process_id", Id::kProcess}}},
      {"nodes",
       {{"node_id", Id::kNode},
        {"thread_id", Id::kThread},
        {"parent_id", Id::kNode},
        {"routine_id", Id::kRoutine}}},
      {"thread_routine_sums", {{"thread_id", Id::kThread}, {"routine_id", Id::kRoutine}}},
      {"node_counters", {{"node_id", Id::kNode}, {"counter_id", Id::kCounter}}},
      {"shapes", {{"shape_id", Id::kShape}, {"node_id", Id::kNode}}},
      {"line_costs", {{"thread_id", Id::kThread}, {"routine_id", Id::kRoutine}}},
      {"gpu_activity",
       {{"activity_id", Id::kActivity},
        {"process_id", Id::kProcess},
        {"node_id", Id::kNode},
        {"origin_node_id", Id::kNode}}},
      {"gpu_metrics", {{"activity_id", Id::kActivity}}},
      {"trace_events", {{"thread_id", Id::kThread}, {"node_id", Id::kNode}}},
      {"trace_drops", {{"thread_id", Id::kThread}}},
      {"comm_ops", {{"node_id", Id::kNode}}},
      {"comm_overlap", {{"thread_id", Id::kThread}}},
      {"op_shapes", {{"node_id", Id::kNode}}},
      {"samples", {{"node_id", Id::kNode}}},
      {"node_timing", {{"node_id", Id::kNode}}},
  };
  return kSpecs;
}
// Written once for the output, or merged by identity rather than by id.
constexpr const char* kSpecialTables[] = {"meta", "runs", "routines", "counters"};

// A process whose rank was not recorded (a sonde before rank detection, or ranks a launcher
// started without MPI_Init) takes it from the launcher's variables recorded with it.
constexpr const char* kRankFromEnvSql = R"sql(
  UPDATE main.processes SET rank = (
    SELECT CAST(i.value AS INTEGER) FROM main.run_info i
    WHERE i.run_id = processes.run_id
      AND (i.process_id = processes.process_id OR i.process_id IS NULL)
      AND i.key IN ('env.OMPI_COMM_WORLD_RANK', 'env.PMI_RANK', 'env.SLURM_PROCID', 'env.RANK')
    ORDER BY i.process_id IS NULL, i.key LIMIT 1)
  WHERE process_id > ?1 AND rank IS NULL)sql";

// The rank views sum nodes per thread and routine (rank_hotspots); on a file of many ranks a
// covering index in that order lets SQLite aggregate while it scans instead of sorting every
// node (1,024 merged ranks: rank_imbalance 1.40 -> 0.56 s CPU). Built once, after the copies,
// so the inserts do not maintain it; a rank's own small file does without.
constexpr const char* kRankSumsIndexSql =
    "CREATE INDEX IF NOT EXISTS nodes_rank_sums ON nodes(thread_id, routine_id, parent_id, "
    "recursive, calls, subrs, incl_ns, excl_ns, bytes)";

class Output {
 public:
  Output(const std::string& path) : path_(path) {
    std::string error;
    if (!db_.open(path, true, error, true))
      throw Error(fmt::format("cannot create {}: {}", path, error));
    // The output is a temporary file renamed only when whole, so a crash loses nothing a
    // journal would have saved; 32 MiB of page cache bounds the memory.
    exec(
        "PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF; PRAGMA cache_size = -32768;"
        "PRAGMA temp_store = FILE");
  }
  [[noreturn]] void fail(const std::string& what) const {
    throw Error(fmt::format("{}: {}", what, db_.message()));
  }
  void exec(const std::string& sql) {
    std::string error;
    if (!db_.exec(sql.c_str(), error)) throw Error(fmt::format("writing {}: {}", path_, error));
  }
  void exec_quietly(const char* sql) {
    std::string ignored;
    db_.exec(sql, ignored);
  }
  std::int64_t integer(const std::string& sql, std::int64_t bound = 0) const {
    sonde::Statement st(db_.handle(), sql);
    if (!st.ok()) fail(fmt::format("writing {}", path_));
    if (sql.find("?1") != std::string::npos) st.bind(1, bound);
    int rc = st.step();
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) fail(fmt::format("writing {}", path_));
    return rc == SQLITE_ROW ? st.column_int(0) : 0;
  }
  std::vector<std::string> texts(const std::string& sql) const {
    sonde::Statement st(db_.handle(), sql);
    if (!st.ok()) fail(fmt::format("reading {}", path_));
    std::vector<std::string> out;
    while (st.step() == SQLITE_ROW) out.push_back(st.column_text(0));
    return out;
  }
  sqlite3* db() const { return db_.handle(); }

 private:
  std::string path_;
  sonde::Database db_;
};

void check_tables_known(const Output& out) {
  for (const std::string& table :
       out.texts("SELECT name FROM main.sqlite_master WHERE type = 'table'")) {
    bool known = std::any_of(table_specs().begin(), table_specs().end(),
                             [&](const TableSpec& s) { return table == s.table; }) ||
                 std::find(std::begin(kSpecialTables), std::end(kSpecialTables), table) !=
                     std::end(kSpecialTables);
    if (!known)
      throw Error(fmt::format("internal: the schema's table {} has no merge rule", table));
  }
}

// INSERT INTO main.T (every column) SELECT (each column, its id shifted or mapped) FROM src.T.
std::string copy_sql(const Output& out, const TableSpec& spec,
                     const std::map<Id, std::int64_t>& offsets) {
  std::vector<std::string> columns =
      out.texts(fmt::format("SELECT name FROM pragma_table_info('{}', 'main')", spec.table));
  // An older input lacks the columns this version added (gpu_activity.origin_node_id): NULL.
  std::vector<std::string> present =
      out.texts(fmt::format("SELECT name FROM pragma_table_info('{}', 'src')", spec.table));
  std::string names, values;
  for (const std::string& c : columns) {
    std::string value = c;
    if (!present.empty() && std::find(present.begin(), present.end(), c) == present.end()) continue;
    auto id =
        std::find_if(spec.ids.begin(), spec.ids.end(), [&](const auto& p) { return p.first == c; });
    if (id != spec.ids.end()) {
      if (id->second == Id::kRun || id->second == Id::kRoutine || id->second == Id::kCounter) {
        const char* map = id->second == Id::kRun       ? "run_map"
                          : id->second == Id::kRoutine ? "routine_map"
                                                       : "counter_map";
        value = fmt::format("(SELECT m.new FROM temp.{} m WHERE m.old = s.{})", map, c);
      } else {
        value = fmt::format("s.{} + {}", c, offsets.at(id->second));  // NULL stays NULL
      }
    } else {
      value = "s." + c;
    }
    names += (names.empty() ? "" : ", ") + c;
    values += (values.empty() ? "" : ", ") + value;
  }
  return fmt::format("INSERT {3}INTO main.{0} ({1}) SELECT {2} FROM src.{0} s", spec.table, names,
                     values, spec.keep_first ? "OR IGNORE " : "");
}

constexpr const char* kMapSql = R"sql(
  INSERT OR IGNORE INTO main.runs (uuid, started_ns, command, host, cpu_model, cores,
                                   affinity_cores, mode)
    SELECT uuid, started_ns, command, host, cpu_model, cores, affinity_cores, mode FROM src.runs;
  UPDATE main.runs SET started_ns = MIN(started_ns, (SELECT s.started_ns FROM src.runs s
                                                     WHERE s.uuid = runs.uuid))
    WHERE uuid IN (SELECT uuid FROM src.runs);
  DELETE FROM temp.run_map;
  INSERT INTO temp.run_map
    SELECT s.run_id, m.run_id FROM src.runs s JOIN main.runs m USING (uuid);
  INSERT OR IGNORE INTO main.routines (name, kind, library, file, line, dtype, role)
    SELECT name, kind, library, file, line, {0}, {1} FROM src.routines r;
  DELETE FROM temp.routine_map;
  INSERT INTO temp.routine_map
    SELECT s.routine_id, m.routine_id FROM src.routines s JOIN main.routines m
      ON m.name = s.name AND m.kind = s.kind AND m.library = s.library AND m.file = s.file
     AND m.line = s.line;
  INSERT OR IGNORE INTO main.counters (name, source) SELECT name, source FROM src.counters;
  DELETE FROM temp.counter_map;
  INSERT INTO temp.counter_map
    SELECT s.counter_id, m.counter_id FROM src.counters s JOIN main.counters m USING (name);
)sql";

struct InputFacts {
  std::set<std::string> uuids;
};

InputFacts read_facts(const std::string& path) {
  ProfileFile file = ProfileFile::open(path);  // version, quick_check, a dead writer's journal
  file.check_tree_links();                     // a cycle would be copied into the merged file
  InputFacts f;
  for (auto st = file.prepare("SELECT uuid FROM runs"); st.step();) f.uuids.insert(st.text(0));
  if (f.uuids.empty()) throw Error(fmt::format("{} holds no run", path));
  return f;
}

class Merger {
 public:
  Merger(const MergeOptions& o, const std::string& tmp) : options_(o), out_(tmp) {
    out_.exec(kSchemaSql);
    out_.exec(
        fmt::format("INSERT INTO meta VALUES ('schema_version', '{}'), "
                    "('created_by', 'sonde merge')",
                    kSchemaVersion));
    out_.exec(
        "CREATE TEMP TABLE run_map (old INTEGER PRIMARY KEY, new INTEGER NOT NULL);"
        "CREATE TEMP TABLE routine_map (old INTEGER PRIMARY KEY, new INTEGER NOT NULL);"
        "CREATE TEMP TABLE counter_map (old INTEGER PRIMARY KEY, new INTEGER NOT NULL)");
    check_tables_known(out_);
  }

  void add(const std::string& path) {
    InputFacts facts = read_facts(path);
    check_same_run(path, facts);
    sonde::Statement attach(out_.db(), "ATTACH DATABASE ?1 AS src");
    attach.bind_copy(1, uri(path));
    if (attach.step() != SQLITE_DONE) out_.fail(fmt::format("cannot read {}", path));
    try {
      copy(path);
    } catch (...) {
      out_.exec_quietly("ROLLBACK; DETACH DATABASE src");  // the error thrown says what failed
      throw;
    }
    out_.exec("DETACH DATABASE src");
    ++result_.files;
  }

  // An input left out for holding no run, said in the merged file too: the world-size
  // warning is the merge's alone, and `sonde ranks` on the file told the user to merge the
  // other ranks' files, one of which held nothing.
  void note_runless(const std::string& path) {
    sonde::Statement st(out_.db(),
                        "INSERT OR IGNORE INTO notes (run_id, process_id, severity, topic, "
                        "message) SELECT MIN(run_id), NULL, 'warning', 'merge-left-out', ?1 "
                        "FROM runs HAVING COUNT(*) > 0");
    std::string message = fmt::format(
        "{} was left out of this merge: it held no run, no flush of its process (still running "
        "then, or it ended before its first: killed, or out of memory)",
        path);
    st.bind(1, message);  // bound, not copied: it outlives the step
    if (st.step() != SQLITE_DONE) out_.fail(fmt::format("noting {} left out", path));
  }

  MergeResult finish() {
    result_.processes = out_.integer("SELECT COUNT(*) FROM processes");
    result_.nodes = out_.integer("SELECT COUNT(*) FROM nodes");
    result_.ranks = static_cast<std::int64_t>(ranks_.size());
    result_.world_size =
        out_.integer("SELECT COALESCE(MAX(world_size), 0) FROM processes WHERE rank IS NOT NULL");
    out_.exec(fmt::format("INSERT INTO meta VALUES ('merged_files', '{}')", result_.files));
    out_.exec(kRankSumsIndexSql);
    return result_;
  }

 private:
  static std::string uri(const std::string& path) {
    std::string out = "file:";
    for (char c : path) {
      if (c == '%' || c == '?' || c == '#')
        out += fmt::format("%{:02X}", c);
      else
        out += c;
    }
    return out + "?mode=ro";
  }

  // One run: the ranks of one job share its run id (runs.uuid, derived from the launcher's job
  // id); a file of another job or of a single process has its own.
  void check_same_run(const std::string& path, const InputFacts& f) {
    if (result_.files == 0) {
      first_ = path;
      result_.run = *f.uuids.begin();
    }
    if (options_.force || (f.uuids.size() == 1 && *f.uuids.begin() == result_.run)) return;
    throw Error(
        fmt::format("{} is not of the same run as {} (run {}, against {}); --force "
                    "merges anyway",
                    path, first_, *f.uuids.begin(), result_.run));
  }

  void copy(const std::string& path) {
    out_.exec("BEGIN");
    std::map<Id, std::int64_t> offsets;
    for (const IdOwner& o : kOwners)
      offsets[o.id] =
          out_.integer(fmt::format("SELECT COALESCE(MAX({}), 0) FROM main.{}", o.column, o.table));
    // An input before version 9 has no routine facts: guessed as its readers guess them.
    bool facts = !out_.texts(
                          "SELECT 1 FROM pragma_table_info('routines', 'src') "
                          "WHERE name = 'role'")
                      .empty();
    out_.exec(fmt::format(fmt::runtime(kMapSql), facts ? "r.dtype" : kLegacyDtypeSql,
                          facts ? "r.role" : kLegacyRoleSql));
    // A table newer than the input's schema (op_shapes before version 6) has nothing to copy.
    std::vector<std::string> present =
        out_.texts("SELECT name FROM src.sqlite_master WHERE type = 'table'");
    for (const TableSpec& spec : table_specs())
      if (std::find(present.begin(), present.end(), spec.table) != present.end())
        out_.exec(copy_sql(out_, spec, offsets));
    std::int64_t first_process = offsets[Id::kProcess];
    out_.integer(kRankFromEnvSql, first_process);
    std::vector<std::string> ranks = out_.texts(fmt::format(
        "SELECT DISTINCT rank FROM process_ranks WHERE process_id > {}", first_process));
    // torchrun's attempt (--max_restarts): one run id, a file per rank per attempt.
    std::string attempt = out_.texts(
        "SELECT COALESCE(MAX(CAST(value AS INTEGER)), 0) FROM src.run_info "
        "WHERE key = 'torch.restart_count'")[0];
    for (const std::string& rank : ranks) {
      auto [at, fresh] = ranks_.emplace(rank, std::pair{path, attempt});
      if (fresh || options_.force || at->second.first == path) continue;
      if (at->second.second != attempt)
        throw Error(fmt::format(
            "{} and {} both hold rank {}, of attempts {} and {} of a job torchrun restarted "
            "(--max_restarts): merge one attempt's files (sonde run's closing line names the "
            "last one's); --force sums the attempts",
            at->second.first, path, rank, at->second.second, attempt));
      throw Error(
          fmt::format("{} and {} both hold rank {}: two runs, or a file given twice; "
                      "--force merges anyway",
                      at->second.first, path, rank));
    }
    out_.exec("COMMIT");
  }

  const MergeOptions& options_;
  Output out_;
  MergeResult result_;
  std::string first_;
  // rank -> the input it came from, and its torchrun attempt
  std::map<std::string, std::pair<std::string, std::string>> ranks_;
};

// The N of "name.rankN.db" (or "name.rankN.PID.db", a rerun's), or -1.
long rank_in_name(const std::string& name) {
  static const std::regex kRank(R"(\.rank([0-9]{1,9})(\.[0-9]{1,10})?\.db$)");
  std::smatch m;
  return std::regex_search(name, m, kRank) ? std::stol(m[1]) : -1;
}

}  // namespace

std::vector<std::string> expand_merge_inputs(const std::vector<std::string>& inputs,
                                             const std::string& output,
                                             std::vector<std::string>* left_out) {
  std::vector<std::string> files;
  for (const std::string& input : inputs) {
    std::error_code ec;
    if (!fs::is_directory(input, ec)) {
      files.push_back(input);
      continue;
    }
    std::vector<std::string> found;
    for (const auto& entry : fs::directory_iterator(input, ec)) {
      std::string p = entry.path().string();
      if (entry.path().extension() == ".db" && entry.is_regular_file(ec) && !same_file(p, output))
        found.push_back(p);
    }
    if (ec) throw Error(fmt::format("cannot list {}: {}", input, ec.message()));
    if (found.empty()) throw Error(fmt::format("{} holds no *.db file", input));
    std::sort(found.begin(), found.end(), [](const std::string& a, const std::string& b) {
      long ra = rank_in_name(a), rb = rank_in_name(b);
      return ra != rb ? ra < rb : a < b;
    });
    // Beside rank files, a file named otherwise is not a rank's: `sonde run -o prof.db --
    // mpirun ...` writes the launcher's own prof.db there, whose processes have no rank (read
    // as rank 0, it was refused as a second rank 0). Given by name, it is merged.
    if (rank_in_name(found.back()) >= 0) {  // sorted: the others come first
      auto ranked = std::find_if(found.begin(), found.end(),
                                 [](const std::string& f) { return rank_in_name(f) >= 0; });
      if (left_out != nullptr) left_out->insert(left_out->end(), found.begin(), ranked);
      found.erase(found.begin(), ranked);
    }
    files.insert(files.end(), found.begin(), found.end());
  }
  return files;
}

MergeResult merge_profiles(const MergeOptions& options) {
  std::vector<std::string> left_out;
  std::vector<std::string> inputs = expand_merge_inputs(options.inputs, options.output, &left_out);
  if (inputs.empty()) throw Error("no input files", 2);
  refuse_repeated_inputs(inputs);
  refuse_input_as_output(inputs, options.output);
  require_regular_output(options.output, options.output);
  std::error_code ec;
  if (fs::exists(options.output, ec) && !options.force)
    throw Error(fmt::format("{} exists; --force replaces it", options.output));
  // Written beside the output and renamed when whole: a failed merge leaves no half file, and
  // an existing output stays until the new one is complete.
  std::vector<std::string> launchers, runless;
  for (auto it = inputs.begin(); it != inputs.end();) {
    ProfileFile file = ProfileFile::open(*it);
    bool launcher = launcher_file_note(file).has_value();
    bool empty = !launcher && !file.prepare("SELECT 1 FROM runs LIMIT 1").step();
    if (launcher) launchers.push_back(*it);
    if (empty) runless.push_back(*it);
    it = launcher || empty ? inputs.erase(it) : it + 1;
  }
  if (inputs.empty() && !launchers.empty())
    throw Error(fmt::format("no rank's file among the inputs: {} is a launcher's own profile, "
                            "whose ranks wrote theirs beside it (prof.rank<R>.db)",
                            launchers.front()),
                2);
  if (inputs.empty())
    throw Error(
        fmt::format("no input holds a run: {} {} no flush of {} yet (still running, or {} "
                    "before its first: killed, or out of memory)",
                    fmt::join(runless, ", "), runless.size() == 1 ? "holds" : "hold",
                    runless.size() == 1 ? "its process" : "their processes",
                    runless.size() == 1 ? "it ended" : "each ended"));
  std::string tmp = fmt::format("{}.merging.{}", options.output, ::getpid());
  try {
    MergeResult result;
    {
      Merger merger(options, tmp);
      for (std::size_t i = 0; i < inputs.size(); ++i) {
        merger.add(inputs[i]);
        if (options.progress) options.progress(i + 1, inputs.size());
      }
      for (const std::string& path : runless) merger.note_runless(path);
      result = merger.finish();
      result.left_out = std::move(left_out);
      result.launchers = std::move(launchers);
      result.runless = std::move(runless);
    }
    if (std::rename(tmp.c_str(), options.output.c_str()) != 0)
      throw Error(
          fmt::format("cannot rename {} to {}: {}", tmp, options.output, std::strerror(errno)));
    return result;
  } catch (...) {
    std::remove(tmp.c_str());
    throw;
  }
}

}  // namespace sonde::analyzers
