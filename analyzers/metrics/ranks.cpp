#include "metrics/ranks.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <set>
#include <string_view>
#include <tuple>
#include <utility>

#include "profile/rank_file.hpp"

namespace sonde::analyzers {
namespace {

std::string limit(std::size_t top) { return top ? fmt::format(" LIMIT {}", top) : ""; }

// Which of the first kMaxCallsAmong rows' routines runs beneath which, at any depth, on some
// call path: one pass over the nodes in id order, each carrying the set of listed routines
// above it as a bit mask (64 rows, one word). A walk up from each listed node in SQL took 3.7
// to 14 s on a 1M-node file; direct edges alone missed forward above aten::linear above sgemm_
// (a red-team find: one rank's extra forward passes were three candidates).
std::set<std::pair<std::int64_t, std::int64_t>> routines_above(
    const ProfileFile& file, const std::vector<RankSummary::Imbalance>& rows) {
  static_assert(RankSummary::kMaxCallsAmong <= 64);
  std::map<std::int64_t, int> bit;
  for (std::size_t i = 0; i < rows.size() && i < RankSummary::kMaxCallsAmong; ++i)
    bit.emplace(rows[i].routine_id, static_cast<int>(i));
  // Three columns in node id order (28 bytes a node: a 1M-node file's maps took 130 MB).
  std::vector<std::int64_t> ids, parents;
  std::vector<int> listed;  // the routine's bit, or -1
  for (auto st = file.prepare("SELECT node_id, COALESCE(parent_id, 0), routine_id FROM nodes "
                              "ORDER BY node_id");
       st.step();) {
    auto it = bit.find(st.int64(2));
    ids.push_back(st.int64(0));
    parents.push_back(st.int64(1));
    listed.push_back(it == bit.end() ? -1 : it->second);
  }
  auto index_of = [&](std::int64_t id) -> std::ptrdiff_t {
    auto at = std::lower_bound(ids.begin(), ids.end(), id);
    return at != ids.end() && *at == id ? at - ids.begin() : -1;
  };
  // A parent is made before its children, so its id is smaller and its mask known; where a file
  // says otherwise the mask is found by walking up (with a guard against a damaged file's cycle).
  std::vector<std::uint64_t> above(ids.size(), 0);  // listed routines above each node
  std::vector<bool> done(ids.size(), false);
  auto mask_of = [&](std::int64_t id) {
    std::uint64_t m = 0;
    for (std::size_t guard = 0; id != 0 && guard < ids.size(); ++guard) {
      std::ptrdiff_t k = index_of(id);
      if (k < 0) break;
      if (listed[k] >= 0) m |= std::uint64_t{1} << listed[k];
      if (done[k]) return m | above[k];
      id = parents[k];
    }
    return m;
  };
  std::uint64_t pairs[64] = {};
  for (std::size_t k = 0; k < ids.size(); ++k) {
    above[k] = parents[k] ? mask_of(parents[k]) : 0;
    done[k] = true;
    if (listed[k] >= 0) pairs[listed[k]] |= above[k];
  }
  std::set<std::pair<std::int64_t, std::int64_t>> out;
  for (const auto& [routine, b] : bit)
    for (const auto& [caller, a] : bit)
      if (a != b && (pairs[b] >> a & 1)) out.emplace(caller, routine);
  return out;
}

// Per rank, the sum of `rows` (thread_id, ns), every rank of rank_times counted (0 where it
// has none): the mean over the ranks and the least, in seconds. The least is the slowest
// rank's wait, the others' more their wait for it.
std::pair<double, double> mean_and_least_over_ranks(const ProfileFile& file,
                                                    std::string_view rows) {
  auto st = file.prepare(fmt::format(
      "SELECT AVG(COALESCE(w.ns, 0)), MIN(COALESCE(w.ns, 0)) FROM rank_times LEFT JOIN (SELECT "
      "pr.rank AS rank, SUM(x.ns) AS ns FROM ({}) x JOIN threads t ON t.thread_id = x.thread_id "
      "JOIN process_ranks pr ON pr.process_id = t.process_id GROUP BY pr.rank) w USING (rank)",
      rows));
  if (!st.step() || st.is_null(0)) return {0, 0};
  return {st.real(0) / 1e9, st.real(1) / 1e9};
}

}  // namespace

Table table_from_sql(const ProfileFile& file, const std::string& sql, std::vector<Column> columns) {
  Table t;
  t.columns = std::move(columns);
  for (auto st = file.prepare(sql); st.step();) {
    std::vector<Cell> row;
    for (int c = 0; c < st.column_count(); ++c) row.push_back(st.cell(c));
    t.rows.push_back(std::move(row));
  }
  return t;
}

RanksReport compute_ranks(const ProfileFile& file, std::size_t top) {
  RanksReport r;
  if (auto st = file.prepare("SELECT COUNT(*) FROM rank_times"); st.step()) r.ranks = st.int64(0);
  r.world_size = run_world_size(file);
  r.merged = file.prepare("SELECT 1 FROM meta WHERE key = 'merged_files'").step();
  for (auto st = file.prepare("SELECT message FROM notes WHERE topic = 'merge-left-out' "
                              "ORDER BY note_id");
       st.step();)
    r.notes.push_back(st.text(0));
  // Only processes that loaded torch (run_info python.torch_loaded): an mpi4py program's
  // ranks lost no torch.distributed collective.
  if (auto st =
          file.prepare("SELECT COUNT(DISTINCT n.process_id) FROM notes n JOIN process_ranks USING "
                       "(process_id) JOIN run_info i ON i.process_id = n.process_id AND i.key = "
                       "'python.torch_loaded' WHERE n.topic = 'python-hook'");
      st.step() && st.int64(0) > 0)
    r.notes.push_back(fmt::format(
        "{} of the ranks' processes ran Python without sonde's Python hook: torch.distributed's "
        "collectives (and its operators) were not recorded there, so their comm figures are "
        "MPI's and NCCL's alone; run them under python3 -m sonde or sonde run --python",
        st.int64(0)));
  r.sections.push_back(
      {"per_rank",
       "Per rank (busy s = compute s + comm s + setup s; comm %: of the rank's busy threads' "
       "time)",
       table_from_sql(
           file,
           "SELECT t.rank, t.host, t.wall_s, t.busy_s, b.compute_s, c.comm_s, c.setup_s, "
           "c.comm_pct, c.bytes, o.exposed_s, o.overlapped_s, o.overlap_pct "
           "FROM rank_times t JOIN rank_comm c USING (rank) JOIN rank_breakdown b USING (rank) "
           "LEFT JOIN rank_overlap o USING (rank) ORDER BY t.rank",
           {{"rank", "rank", 0},
            {"host", "host"},
            {"wall s", "wall_s"},
            {"busy s", "busy_s"},
            {"compute s", "compute_s"},
            {"comm s", "comm_s"},
            {"setup s", "setup_s"},
            {"comm %", "comm_pct", 1},
            {"bytes", "bytes", 0},
            {"exposed s", "exposed_s"},
            {"overlapped s", "overlapped_s"},
            {"overlap %", "overlap_pct", 1}})});
  r.sections.push_back(
      {"imbalance",
       "Load imbalance per routine and phase (inclusive time over ranks; lost: max - mean)",
       table_from_sql(file,
                      "SELECT routine, kind, mean_s, max_s, min_s, max_over_mean, max_over_min, "
                      "slowest_rank, lost_s FROM rank_imbalance WHERE kind <> 'root' "
                      "ORDER BY lost_s DESC, max_s DESC, routine" +
                          limit(top),
                      {{"routine", "routine"},
                       {"kind", "kind"},
                       {"mean s", "mean_s"},
                       {"max s", "max_s"},
                       {"min s", "min_s"},
                       {"max/mean", "max_over_mean", 2},
                       {"max/min", "max_over_min", 2},
                       {"slowest", "slowest_rank", 0},
                       {"lost s", "lost_s"}})});
  r.sections.push_back(
      {"bandwidth", "Communication per operation and message size (GB/s: blocking calls)",
       table_from_sql(
           file,
           "SELECT op, kind, comm_size, message_bytes, ranks, calls, time_s, bytes, "
           "us_per_call, gbs FROM comm_bandwidth ORDER BY time_s DESC, op, message_bytes" +
               limit(top),
           {{"operation", "op"},
            {"kind", "kind"},
            {"comm size", "comm_size", 0},
            {"msg bytes", "message_bytes", 0},
            {"ranks", "ranks", 0},
            {"calls", "calls", 0},
            {"time s", "time_s"},
            {"bytes", "bytes", 0},
            {"us/call", "us_per_call", 1},
            {"GB/s", "gbs", 4}})});  // small messages move MB/s: 0.0023, not 0.00
  return r;
}

Json rank_routines_json(const ProfileFile& file, std::size_t top) {
  Json ranks = Json::array();
  std::map<std::int64_t, std::size_t> column;  // rank -> its place in "ranks"
  for (auto st = file.prepare("SELECT rank FROM rank_times ORDER BY rank"); st.step();) {
    column.emplace(st.int64(0), ranks.size());
    ranks.push_back(st.int64(0));
  }
  Json routines = Json::array();
  std::map<std::int64_t, std::size_t> row;  // routine_id -> its place in "routines"
  std::string ids;
  std::int64_t in_all = 0;
  // The count of all rows comes with the first ones (a window over the view, before the
  // LIMIT): rank_imbalance is computed once, 0.3 s of CPU on 1,024 ranks of 1,126 paths.
  for (auto st = file.prepare(
           "SELECT routine_id, routine, kind, mean_s, min_s, max_s, slowest_rank, lost_s, "
           "COUNT(*) OVER () FROM rank_imbalance WHERE kind <> 'root' "
           "ORDER BY lost_s DESC, max_s DESC, routine" +
           limit(top));
       st.step();) {
    Json r = Json::object();
    int last = st.column_count() - 1;
    for (int c = 0; c < last; ++c) r[st.column_name(c)] = cell_to_json(st.cell(c));
    r["incl_s"] = Json(std::vector<std::nullptr_t>(ranks.size(), nullptr));
    in_all = st.int64(last);
    row.emplace(st.int64(0), routines.size());
    ids += fmt::format("{}{}", ids.empty() ? "" : ",", st.int64(0));
    routines.push_back(std::move(r));
  }
  if (!ids.empty())
    for (auto st = file.prepare(fmt::format(
             "SELECT routine_id, rank, incl_s FROM rank_hotspots WHERE routine_id IN ({})", ids));
         st.step();)
      routines[row.at(st.int64(0))]["incl_s"][column.at(st.int64(1))] = st.real(2);
  return {
      {"ranks", std::move(ranks)}, {"routines", std::move(routines)}, {"routines_in_all", in_all}};
}

namespace {

// Which of the first rows' routines every rank ran with the same calls, FLOPs and bytes, the
// cost models' exact counts. Two DDP ranks of identical batches, on a 2-core host loaded by
// other work, read sgemm_ 0.386 s against 0.095 s, the same 240 calls and 4,085,514,240 FLOPs on
// each, and were told to partition their work by cost (a red-team find; it did not recur).
void mark_same_work(const ProfileFile& file, RankSummary& r) {
  std::map<std::int64_t, RankSummary::Imbalance*> listed;
  for (std::size_t i = 0; i < r.imbalance.size() && i < RankSummary::kMaxCallsAmong; ++i)
    listed.emplace(r.imbalance[i].routine_id, &r.imbalance[i]);
  if (listed.empty()) return;
  std::string ids;
  for (const auto& [id, row] : listed) ids += fmt::format("{}{}", ids.empty() ? "" : ",", id);
  auto st = file.prepare(fmt::format(
      "SELECT routine_id, COUNT(*), MIN(c) = MAX(c), MIN(f) = MAX(f), MIN(b) = MAX(b), "
      "MAX(f) > 0 OR MAX(b) > 0 FROM (SELECT n.routine_id AS routine_id, pr.rank, "
      "SUM(n.calls) AS c, SUM(n.flops) AS f, SUM(n.bytes) AS b FROM nodes n JOIN threads t "
      "USING (thread_id) JOIN process_ranks pr USING (process_id) WHERE n.routine_id IN ({}) "
      "GROUP BY n.routine_id, pr.rank) GROUP BY routine_id",
      ids));
  while (st.step())
    listed[st.int64(0)]->same_work =
        st.int64(1) == r.ranks && st.int64(2) && st.int64(3) && st.int64(4) && st.int64(5);
}

}  // namespace

RankSummary load_rank_summary(const ProfileFile& file) {
  RankSummary r;
  if (auto st = file.prepare("SELECT COUNT(*), AVG(busy_s) FROM rank_times"); st.step()) {
    r.ranks = st.int64(0);
    r.mean_busy_s = st.is_null(1) ? 0 : st.real(1);
  }
  if (r.ranks < 2) return r;
  // Communication routines are waiting, not computing: their imbalance is the computation's,
  // which the other rows name (torch.distributed's Python layer among them, which waits on the
  // collective its c10d operator only posts): routine_comm's is_comm. A phase around an
  // all-reduce is judged on each rank's time outside the communication beneath it (below), not
  // left out where its time summed over the ranks was mostly communication: that dropped a DDP
  // script's main (the waiting rank's barrier dominating the sum) and left <module> above it
  // the first candidate, its chain to the callees cut (a red-team find). The imbalance table
  // (compute_ranks) keeps
  // every row: it is the measurement, this is the advice. Imports (the Python hook's folded
  // <import>) are set-up, as the rendezvous is: ranks importing torch side by side on shared cores
  // differ by seconds, and meet first in init_process_group. So is a frame whose time is mostly
  // imports: a spawned rank's <module> (multiprocessing imports __mp_main__ again before the
  // worker runs) and runpy's frames above it (a helper's 2-rank spawn under load: rank 1's
  // <module> 0.31 s longer, the top candidate).
  //
  // The interpreter's start-up and teardown are set-up too: a rank freeing torch and its process
  // group after the others, on a loaded machine, was a candidate (0.75 s under the clean-clone
  // CI's load, in the DDP test); so was rank 1's start-up, 0.055 s longer, of two mp.spawn
  // ranks starting on 2 cores (a red-team run).
  //
  // And each rank's time in a routine is taken outside the communication, set-up and imports
  // beneath it on that rank: a routine holding both a rank's computation and the other's wait
  // (init_process_group's rendezvous, an all-reduce waiting for the slow rank) was judged on
  // its inclusive time, longest on the rank that waited (a red-team case: work() named rank 0,
  // 0.152 s lost, all of it rank 0's rendezvous wait). rank_hotspots has the helper threads'
  // waits for work out (the waits views), so what is taken here comes from outside them: a mark
  // inside one is none, and a mark above one is taken less the waits below it.
  //
  // DDP's reducer waits for its buckets' all-reduces at the end of the backward pass, in the
  // own time of the frame that runs the engine (the view engine_waits): taken as communication
  // too. Judged on its inclusive time, a red-team run's rank 0 backward, 257 ms of own time
  // against rank 1's 9.7 ms, was the second imbalance, the other rank's augment() the first.
  constexpr const char* kOutsideWaits =
      "WITH RECURSIVE mark(node_id) AS ("
      "  SELECT node_id FROM comm_ops UNION "
      "  SELECT n.node_id FROM routines r JOIN nodes n USING (routine_id) WHERE r.kind = 'python' "
      "  AND (r.name = '<import>' OR instr(r.file, 'torch/distributed/distributed_c10d.py') > 0) "
      "  EXCEPT SELECT node_id FROM waited_nodes), "
      "up(mark, node_id) AS ("
      "  SELECT m.node_id, n.parent_id FROM mark m JOIN nodes n USING (node_id) "
      "  UNION ALL SELECT up.mark, n.parent_id FROM up JOIN nodes n ON n.node_id = up.node_id "
      "  WHERE n.parent_id IS NOT NULL), "
      "outer_mark(node_id) AS (SELECT node_id FROM mark EXCEPT "
      "  SELECT up.mark FROM up JOIN mark m ON m.node_id = up.node_id), "
      "engine_up(wait, node_id) AS ("
      "  SELECT node_id, node_id FROM engine_waits "
      "  UNION ALL SELECT e.wait, n.parent_id FROM engine_up e JOIN nodes n "
      "  ON n.node_id = e.node_id WHERE n.parent_id IS NOT NULL), "
      "under(routine_id, rank, ns) AS ("
      "  SELECT routine_id, rank, SUM(incl_ns) FROM (SELECT DISTINCT a.routine_id AS routine_id, "
      "    pr.rank AS rank, up.mark AS mark, c.incl_ns - COALESCE(w.ns, 0) AS incl_ns FROM up "
      "    JOIN outer_mark o ON o.node_id = up.mark JOIN nodes a ON a.node_id = up.node_id "
      "    JOIN nodes c ON c.node_id = up.mark LEFT JOIN wait_cuts w ON w.node_id = up.mark "
      "    JOIN threads t ON t.thread_id = c.thread_id JOIN process_ranks pr USING (process_id) "
      "    UNION SELECT DISTINCT a.routine_id, pr.rank, e.wait, w.ns FROM engine_up e "
      "    JOIN nodes a ON a.node_id = e.node_id JOIN engine_waits w ON w.node_id = e.wait "
      "    JOIN threads t ON t.thread_id = w.thread_id JOIN process_ranks pr USING (process_id)) "
      "  GROUP BY routine_id, rank), "
      "per(routine_id, rank, s) AS ("
      "  SELECT h.routine_id, h.rank, MAX(h.incl_s - COALESCE(u.ns, 0) / 1e9, 0.0) "
      "  FROM rank_hotspots h LEFT JOIN under u ON u.routine_id = h.routine_id "
      "  AND u.rank = h.rank), "
      "ordered AS (SELECT routine_id, rank, s, ROW_NUMBER() OVER (PARTITION BY routine_id "
      "  ORDER BY s DESC, rank) AS nth FROM per), "
      "agg AS (SELECT routine_id, COUNT(*) AS ranks_with, SUM(s) AS sum_s, MAX(s) AS max_s, "
      "  MIN(s) AS min_s, MAX(CASE WHEN nth = 1 THEN rank END) AS slowest_rank "
      "  FROM ordered GROUP BY routine_id), "
      "n(ranks) AS (SELECT COUNT(*) FROM rank_times) "
      "SELECT r.name, r.kind, agg.sum_s / n.ranks, agg.max_s, "
      "  CASE WHEN agg.ranks_with < n.ranks THEN 0.0 ELSE agg.min_s END, "
      "  CASE WHEN agg.sum_s > 0 THEN agg.max_s * n.ranks / agg.sum_s END, "
      "  agg.max_s - agg.sum_s / n.ranks, agg.slowest_rank, r.routine_id "
      "FROM agg JOIN routines r USING (routine_id) LEFT JOIN routine_comm c USING (routine_id), n "
      "WHERE r.kind <> 'root' "
      "AND r.name NOT IN ('<import>', '<interpreter start-up>', '<interpreter teardown>') "
      "AND agg.sum_s > 0 "
      "AND NOT COALESCE(c.is_comm, 0) "
      "ORDER BY agg.max_s - agg.sum_s / n.ranks DESC, r.name";
  for (auto st = file.prepare(kOutsideWaits); st.step();)
    r.imbalance.push_back({st.text(0), st.text(1), st.real(2), st.real(3), st.real(4), st.real(5),
                           st.real(6), st.int64(7), st.int64(8)});
  if (!r.imbalance.empty()) r.above = routines_above(file, r.imbalance);
  mark_same_work(file, r);
  if (auto st = file.prepare("SELECT AVG(comm_s) FROM rank_comm"); st.step() && !st.is_null(0))
    r.comm_s = st.real(0);
  if (auto st = file.prepare("SELECT SUM(exposed_s), SUM(overlapped_s), COUNT(*), "
                             "MIN(exposed_s) FROM rank_overlap");
      st.step() && st.int64(2) > 0) {
    r.has_overlap = true;
    r.exposed_s = st.real(0) / static_cast<double>(r.ranks);
    r.overlapped_s = st.real(1) / static_cast<double>(r.ranks);
    // A rank without a row exposed nothing.
    r.exposed_least_s = st.int64(2) < r.ranks ? 0.0 : st.real(3);
  }
  for (auto [view, out] :
       {std::pair{"engine_waits", &r.reducer_wait_s}, std::pair{"c10d_waits", &r.c10d_wait_s}}) {
    auto st = file.prepare(
        fmt::format("SELECT COALESCE(SUM(w.ns), 0) FROM {} w JOIN threads t USING (thread_id) "
                    "JOIN process_ranks USING (process_id)",
                    view));
    if (st.step()) *out = st.real(0) / 1e9 / static_cast<double>(r.ranks);
  }
  if (r.ranks > 0) {
    std::tie(r.work_wait_s, r.work_wait_least_s) = mean_and_least_over_ranks(
        file,
        "SELECT n.thread_id AS thread_id, co.time_ns AS ns FROM comm_ops co JOIN nodes n USING "
        "(node_id) JOIN routines rt USING (routine_id) WHERE co.kind = 'wait' AND rt.name = "
        "'c10d::Work::wait'");
  }
  if (r.reducer_wait_s > 0)
    r.reducer_wait_least_s =
        mean_and_least_over_ranks(file, "SELECT thread_id, ns FROM engine_waits").second;
  // Each group's calls with the c10d frame's wait around each (a frame holding one operation
  // node: the wait is its, shared by the node's message sizes in proportion to their calls),
  // per rank. One statement: c10d_waits walks the frames' ancestors. A frame whose node held
  // two sizes was taken for two operations, and its wait for none (a red-team per-parameter
  // all-reduce read 0.47 s of its 2.72 s).
  std::map<std::tuple<std::string, std::int64_t, std::int64_t, std::int64_t>,
           std::map<std::int64_t, double>>
      per_rank;
  for (auto st = file.prepare(
           "WITH one AS (SELECT w.node_id AS frame, w.ns AS ns, MIN(c.node_id) AS op_node "
           "             FROM c10d_waits w JOIN nodes c ON c.parent_id = w.node_id "
           "             WHERE c.node_id IN (SELECT node_id FROM comm_ops) GROUP BY w.node_id "
           "             HAVING COUNT(*) = 1), "
           "node_calls AS (SELECT node_id, SUM(calls) AS calls FROM comm_ops GROUP BY node_id) "
           "SELECT co.op, co.bytes, co.blocking, co.comm_size, pr.rank, "
           "       SUM(co.time_ns + COALESCE(1.0 * one.ns * co.calls / nc.calls, 0)) / 1e9 "
           "FROM comm_ops co JOIN nodes n USING (node_id) JOIN threads t USING (thread_id) "
           "JOIN process_ranks pr USING (process_id) JOIN node_calls nc USING (node_id) "
           "LEFT JOIN one ON one.op_node = co.node_id "
           "WHERE co.kind = 'collective' "
           "GROUP BY co.op, co.bytes, co.blocking, co.comm_size, pr.rank");
       st.step();)
    per_rank[{st.text(0), st.int64(1), st.int64(2), st.int64(3)}][st.int64(4)] = st.real(5);
  for (auto st = file.prepare("SELECT op, message_bytes, calls, ranks, time_s, blocking, "
                              "comm_size FROM comm_bandwidth WHERE kind = 'collective' "
                              "ORDER BY time_s DESC");
       st.step();) {
    RankSummary::Collective c{st.text(0), st.int64(1), st.int64(2), st.int64(3), st.real(4)};
    c.blocking = st.int64(5);
    c.comm_size = st.int64(6);
    if (auto it = per_rank.find({c.op, c.message_bytes, c.blocking, c.comm_size});
        it != per_rank.end())
      c.rank_s = std::move(it->second);
    r.collectives.push_back(std::move(c));
  }
  return r;
}

}  // namespace sonde::analyzers
