#include "profile/rank_file.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <iterator>
#include <vector>

#include "schema_sql.hpp"  // generated from store_schema.sql and store_views.sql

namespace sonde::analyzers {
namespace {

// What of each table belongs to the rank: rows of its processes, of their threads, of those
// threads' call paths, of their GPU activities. Tables of the run (meta, runs, routines,
// counters, peaks) are copied whole. A table missing here is refused (see copy_rank), so a new
// table can never be left out of a rank's figures silently.
constexpr const char* kCopies[][2] = {
    {"meta", ""},
    {"runs", ""},
    {"routines", ""},
    {"counters", ""},
    {"peaks", ""},
    {"processes", "process_id IN (SELECT id FROM temp.keep_processes)"},
    {"run_info", "process_id IS NULL OR process_id IN (SELECT id FROM temp.keep_processes)"},
    {"notes", "process_id IS NULL OR process_id IN (SELECT id FROM temp.keep_processes)"},
    {"threads", "process_id IN (SELECT id FROM temp.keep_processes)"},
    {"nodes", "thread_id IN (SELECT thread_id FROM main.threads)"},
    {"thread_routine_sums", "thread_id IN (SELECT thread_id FROM main.threads)"},
    {"node_counters", "node_id IN (SELECT node_id FROM main.nodes)"},
    {"shapes", "node_id IN (SELECT node_id FROM main.nodes)"},
    {"comm_ops", "node_id IN (SELECT node_id FROM main.nodes)"},
    {"op_shapes", "node_id IN (SELECT node_id FROM main.nodes)"},
    {"samples", "node_id IN (SELECT node_id FROM main.nodes)"},
    {"node_timing", "node_id IN (SELECT node_id FROM main.nodes)"},
    {"line_costs", "thread_id IN (SELECT thread_id FROM main.threads)"},
    {"comm_overlap", "thread_id IN (SELECT thread_id FROM main.threads)"},
    {"trace_events", "thread_id IN (SELECT thread_id FROM main.threads)"},
    {"trace_drops", "thread_id IN (SELECT thread_id FROM main.threads)"},
    {"gpu_activity", "process_id IN (SELECT id FROM temp.keep_processes)"},
    {"gpu_metrics", "activity_id IN (SELECT activity_id FROM main.gpu_activity)"},
};

std::vector<std::int64_t> ranks_of(const ProfileFile& file) {
  std::vector<std::int64_t> ranks;
  for (auto st = file.prepare("SELECT rank FROM rank_times ORDER BY rank"); st.step();)
    ranks.push_back(st.int64(0));
  return ranks;
}

std::string listed(const std::vector<std::int64_t>& ranks) {
  if (ranks.size() > 8)
    return fmt::format("{} ranks, {} to {}", ranks.size(), ranks.front(), ranks.back());
  return fmt::format("rank{} {}", ranks.size() == 1 ? "" : "s", fmt::join(ranks, ", "));
}

}  // namespace

ProfileFile ProfileFile::open_rank(const std::string& path, std::int64_t rank) {
  ProfileFile source = open(path);  // its checks: readable, a profile, this version
  std::vector<std::int64_t> ranks = ranks_of(source);
  if (std::find(ranks.begin(), ranks.end(), rank) == ranks.end())
    throw Error(fmt::format("{} holds no rank {} ({})", path, rank, listed(ranks)), 2);
  std::vector<std::int64_t> processes;
  auto st = source.prepare("SELECT process_id FROM process_ranks WHERE rank = ?1");
  for (st.bind(1, rank); st.step();) processes.push_back(st.int64(0));
  return open_processes(source, processes);
}

ProfileFile ProfileFile::open_processes(const ProfileFile& source,
                                        const std::vector<std::int64_t>& process_ids) {
  const std::string& path = source.path();
  for (auto st = source.prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND "
                                "name NOT LIKE 'sqlite_%'");
       st.step();) {
    std::string t = st.text(0);
    if (std::none_of(std::begin(kCopies), std::end(kCopies),
                     [&](const auto& c) { return t == c[0]; }))
      throw Error(
          fmt::format("{}: table {} is not known to --rank; this sonde cannot take "
                      "one rank of it",
                      path, t));
  }
  ProfileFile file(path);
  std::string error;
  if (!file.db_.open(":memory:", true, error))
    throw Error(fmt::format("cannot take processes of {}: {}", path, error));
  file.limit_work();
  file.exec(kSchemaSql);
  {
    auto attach = file.prepare("ATTACH DATABASE ?1 AS src");
    attach.bind(1, path);
    attach.step();
  }
  file.exec("CREATE TEMP TABLE keep_processes (id INTEGER PRIMARY KEY)");
  for (std::int64_t id : process_ids) {
    auto keep = file.prepare("INSERT OR IGNORE INTO temp.keep_processes VALUES (?1)");
    keep.bind(1, id);
    keep.step();
  }
  for (const auto& [table, where] : kCopies) {
    if (!file.prepare(fmt::format("SELECT 1 FROM src.sqlite_master WHERE type = 'table' AND "
                                  "name = '{}'",
                                  table))
             .step())
      continue;  // an older file without it
    // By the source's columns: an older file lacks some of this version's (NULL here).
    std::string columns;
    for (auto c =
             file.prepare(fmt::format("SELECT name FROM pragma_table_info('{}', 'src')", table));
         c.step();)
      columns += (columns.empty() ? "" : ", ") + c.text(0);
    file.exec(fmt::format("INSERT INTO main.{0} ({3}) SELECT {3} FROM src.{0}{1}{2}", table,
                          *where ? " WHERE " : "", where, columns));
  }
  // The run's command is the one of its first process (write_run); in a merged file that is
  // rank 0's, and the ranks of a job may have been started with other arguments.
  file.exec(
      "UPDATE main.runs SET command = (SELECT command FROM main.processes ORDER BY "
      "origin <> 'root', started_ns, process_id LIMIT 1) WHERE EXISTS (SELECT 1 FROM "
      "main.processes)");
  file.exec("DETACH DATABASE src; PRAGMA query_only = 1");
  file.schema_version_ = source.schema_version();
  file.first_process_left_out_ = source.first_process_left_out_;
  for (auto st = source.prepare(kRunFirstProcesses); st.step();) {
    if (std::find(process_ids.begin(), process_ids.end(), st.int64(0)) == process_ids.end())
      file.first_process_left_out_ = true;
  }
  return file;
}

ProfileFile open_profile(const std::string& path, std::optional<std::int64_t> rank) {
  return rank ? ProfileFile::open_rank(path, *rank) : ProfileFile::open(path);
}

ProfileFile open_pid(const ProfileFile& file, std::int64_t pid) {
  std::vector<std::int64_t> ids, ranks, pids;
  {
    auto st = file.prepare(
        "SELECT p.process_id, pr.rank FROM processes p JOIN process_ranks pr "
        "USING (process_id) WHERE p.pid = ?1 ORDER BY p.process_id");
    st.bind(1, pid);
    while (st.step()) {
      ids.push_back(st.int64(0));
      ranks.push_back(st.int64(1));
    }
  }
  if (ids.empty()) {
    for (auto st = file.prepare("SELECT pid FROM processes ORDER BY process_id"); st.step();)
      pids.push_back(st.int64(0));
    std::string list = pids.size() > 8 ? fmt::format("{} processes", pids.size())
                                       : fmt::format("pids {}", fmt::join(pids, ", "));
    throw Error(fmt::format("{} holds no process {} ({})", file.path(), pid, list), 2);
  }
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  if (ranks.size() > 1)
    throw Error(fmt::format("{} holds processes with pid {} in {}: add --rank R", file.path(), pid,
                            listed(ranks)),
                2);
  return ProfileFile::open_processes(file, ids);
}

std::int64_t run_world_size(const ProfileFile& file) {
  auto st =
      file.prepare("SELECT COALESCE(MAX(world_size), 0) FROM processes WHERE rank IS NOT NULL");
  return st.step() ? st.int64(0) : 0;
}

std::optional<std::string> all_ranks_note(const ProfileFile& file) {
  std::vector<std::int64_t> ranks = ranks_of(file);
  if (ranks.size() < 2) return std::nullopt;
  return fmt::format(
      "all {} ranks summed ({}): times and calls add up over ranks, percentages "
      "are of their busy time together; --rank R shows one rank",
      ranks.size(), listed(ranks));
}

}  // namespace sonde::analyzers
