// sonde ranks: how a run's ranks differ (load imbalance per routine and phase, communication
// share, bandwidth per operation and message size, exposed against overlapped communication),
// read from the rank views of store_views.sql, which define every figure.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "base/table_format.hpp"
#include "profile/profile_file.hpp"

namespace sonde::analyzers {

struct RanksSection {
  std::string id;     // the JSON member
  std::string title;  // the text heading
  Table table;
};

struct RanksReport {
  std::int64_t ranks = 0;
  std::int64_t world_size = 0;         // the run's, as its ranks said it (0: not known)
  std::vector<RanksSection> sections;  // per rank, imbalance, bandwidth
  // What the tables cannot show: ranks' interpreters that ran without the Python hook record no
  // torch.distributed collective, and read as ranks that never communicated (a red-team run).
  std::vector<std::string> notes;
  // The file is a merge (meta merged_files): ranks missing from it are not in other files to
  // merge, as a rank's own file says.
  bool merged = false;
};

// `top` bounds the imbalance and bandwidth rows (0: all); the per-rank rows are all there.
RanksReport compute_ranks(const ProfileFile& file, std::size_t top);

// The per-routine bars of the viewer's ranks panel: the first `top` routines and phases of the
// imbalance table (its order) with their mean, min and max over ranks (rank_imbalance) and each
// rank's inclusive time in them (rank_hotspots; null where the rank never called it):
// {"ranks": [R...], "routines": [{routine_id, routine, kind, mean_s, min_s, max_s,
// slowest_rank, lost_s, "incl_s": [one per rank of "ranks"]}], "routines_in_all"}.
Json rank_routines_json(const ProfileFile& file, std::size_t top);

// What the rank rules of `sonde candidates` read (advice/rank_rules.cpp), from the same views.
struct RankSummary {
  std::int64_t ranks = 0;
  double mean_busy_s = 0;  // a rank's busy threads' time, averaged over ranks
  struct Imbalance {
    std::string routine, kind;
    double mean_s = 0, max_s = 0, min_s = 0, max_over_mean = 0, lost_s = 0;
    std::int64_t slowest_rank = 0;
    std::int64_t routine_id = 0;
    // Every rank made the same calls of it with the same FLOPs and bytes (a routine with a cost
    // model: a BLAS, oneDNN or MPI call): its time differs by how fast each rank ran it, not by
    // how much each had (same_work_of, for the first kMaxCallsAmong rows).
    bool same_work = false;
  };
  std::vector<Imbalance> imbalance;  // computation: routines outside communication, by lost_s
  // (above, beneath) routine ids among the first kMaxCallsAmong rows of `imbalance`: the first
  // runs on a call path of the second, at any depth, in some rank: which imbalance is another's.
  std::set<std::pair<std::int64_t, std::int64_t>> above;
  static constexpr std::size_t kMaxCallsAmong = 64;
  // Averaged over ranks.
  double exposed_s = 0, overlapped_s = 0, comm_s = 0;
  // The exposed time of the rank that exposes least: the slowest rank, which waits for none.
  double exposed_least_s = 0;
  // Of exposed_s, per rank: DDP's reducer waiting at the end of backward (engine_waits) and the
  // program's own torch.distributed calls waiting in their frames (c10d_waits).
  double reducer_wait_s = 0, c10d_wait_s = 0;
  // The reducer's wait on the rank where it is least (0 where a rank has none): the slowest
  // rank's, what its own buckets' all-reduces cost it; the rest of the others' is their wait
  // for it, the imbalance's.
  double reducer_wait_least_s = 0;
  // The program's own Work.wait() (comm ops of c10d::Work::wait), per rank on average and on
  // the rank where it is least, as the reducer's.
  double work_wait_s = 0, work_wait_least_s = 0;
  bool has_overlap = false;
  struct Collective {
    std::string op;
    std::int64_t message_bytes = 0, calls = 0, ranks = 0;
    double time_s = 0;  // comm_bandwidth's: the calls' own time (a nonblocking one's posting)
    std::int64_t blocking = 0, comm_size = 0;
    // Per rank, the calls' time with the waits of torch.distributed's Python frame around each
    // (c10d_waits: a blocking all_reduce of a scalar waits there, its call's own time the
    // posting alone); the least of them is the latency every rank pays, not a wait for a slower
    // one. Empty (no rank's calls found) in a file without ranks.
    std::map<std::int64_t, double> rank_s;
  };
  std::vector<Collective> collectives;  // by time, largest first
};
RankSummary load_rank_summary(const ProfileFile& file);

// Rows of `sql` into a table with these columns, in the statement's column order.
Table table_from_sql(const ProfileFile& file, const std::string& sql, std::vector<Column> columns);

}  // namespace sonde::analyzers
