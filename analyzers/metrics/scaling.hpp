// sonde scaling: strong and weak scaling efficiency between runs of different rank or thread
// counts, for the whole run and per routine and phase. Each run's figures come from its views
// (run_scale, rank_imbalance); efficiency is defined once, by scaling_efficiency.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace sonde::analyzers {

struct ScalingRun {
  std::string path;
  std::int64_t ranks = 0, threads = 0;
  std::int64_t workers() const { return ranks * threads; }
  double time_s = 0;  // the slowest rank's wall time
  // The slowest rank's time in its training loop's iterations (the breakdown's), and the most
  // iterations a rank ran: the run less its imports, rendezvous and teardown, which made a
  // 2-rank DDP run read 19.7 % efficiency where its loops scaled 35 % (a red-team find). None
  // where no loop is found, or the file holds more than kLoopRanks ranks (each rank's tree is
  // read).
  std::optional<double> loop_s;
  std::optional<std::int64_t> iterations;
};
inline constexpr std::int64_t kLoopRanks = 64;

struct ScalingRoutine {
  std::string routine, kind;
  std::vector<std::optional<double>> time_s;  // per run: the slowest rank's time in it
};

struct Scaling {
  bool weak = false;
  std::vector<ScalingRun> runs;          // by workers (ranks x threads), the first is the reference
  std::vector<ScalingRoutine> routines;  // by the reference run's time, largest first
  // What makes the comparison doubtful: runs of the same workers scale nothing (two different
  // scripts on 2 workers each read "312.6 % efficiency" without a word). Runs with different
  // arguments are not warned about: weak scaling grows the problem by its arguments.
  std::vector<std::string> warnings;
};

// Strong (the same global problem): t_ref * w_ref / (t * w); weak (the same problem per worker):
// t_ref / t. 1 is perfect scaling.
double scaling_efficiency(double ref_time, std::int64_t ref_workers, double time,
                          std::int64_t workers, bool weak);

// `top` routines (0: all) of the reference run, matched across runs by kind, name, library, file
// and line. Throws Error for an unreadable file or fewer than two.
Scaling compute_scaling(const std::vector<std::string>& paths, bool weak, std::size_t top);

}  // namespace sonde::analyzers
