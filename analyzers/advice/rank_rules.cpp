#include "advice/rank_rules.hpp"

#include <fmt/format.h>

#include <map>
#include <optional>
#include <set>
#include <string>

namespace sonde::analyzers {
namespace {

// Candidates of one rule at most: the nested phases of one imbalance would repeat it.
constexpr std::size_t kMaxPerRule = 3;
// Below this share of a rank's busy time a figure is noise, whatever the ratio says.
constexpr double kMinShare = 0.01;

// A callee that holds at least this share of its caller's lost time is the same imbalance.
constexpr double kSameImbalance = 0.9;

}  // namespace

std::vector<Candidate> rank_imbalance(const AdviceInput& in, const Rule& rule) {
  const RankSummary& r = in.ranks;
  std::vector<Candidate> out;
  if (r.ranks < 2 || r.mean_busy_s <= 0) return out;
  using Row = RankSummary::Imbalance;
  std::vector<const Row*> rows;
  for (const auto& i : r.imbalance) {
    if (rows.size() == RankSummary::kMaxCallsAmong) break;
    if (i.max_over_mean >= 1 + rule.threshold / 100 && i.lost_s >= kMinShare * r.mean_busy_s)
      rows.push_back(&i);
  }
  // One cause, one candidate: a frame whose callee holds (nearly) all of its lost time (a
  // Python step() whose only work is compute(), <module> above both) is the same imbalance
  // seen from further up. The deepest of such a chain is kept: it names the work that differs
  // between the ranks, where its callers only lead to it; the callers are named in its evidence.
  auto same_below = [&](std::size_t caller) -> std::optional<std::size_t> {
    for (std::size_t callee = 0; callee < rows.size(); ++callee) {
      std::int64_t a = rows[caller]->routine_id, b = rows[callee]->routine_id;
      // Two routines that call each other (recursion through both) collapse one way only:
      // into the one listed later, the smaller lost time.
      bool mutual = r.calls.count({b, a}) > 0;
      if (r.calls.count({a, b}) && (!mutual || callee > caller) &&
          rows[callee]->lost_s >= kSameImbalance * rows[caller]->lost_s)
        return callee;
    }
    return std::nullopt;
  };
  std::map<std::size_t, std::vector<std::string>> callers;
  std::vector<bool> collapsed(rows.size(), false);
  for (std::size_t row = 0; row < rows.size(); ++row) {
    std::size_t deepest = row;
    std::set<std::size_t> seen{row};
    bool cycle = false;  // a longer ring of calls: no deepest, each is kept
    while (auto below = same_below(deepest)) {
      if ((cycle = !seen.insert(*below).second)) break;
      deepest = *below;
    }
    if (deepest == row || cycle) continue;
    collapsed[row] = true;
    callers[deepest].push_back(rows[row]->routine);
  }
  for (std::size_t row = 0; row < rows.size(); ++row) {
    const Row& i = *rows[row];
    if (out.size() == kMaxPerRule) break;
    if (collapsed[row]) continue;
    Candidate c;
    c.rule = std::string(rule.id);
    c.location = fmt::format("{} [{}]", i.routine, i.kind);
    c.summary = fmt::format(
        "rank {} spends {:.3f} s in {} outside communication, {:.2f}x the mean over {} ranks "
        "({:.3f} s): the others wait {:.3f} s for it where they next synchronise",
        i.slowest_rank, i.max_s, i.routine, i.max_over_mean, r.ranks, i.mean_s, i.lost_s);
    c.evidence = {{"ranks", r.ranks},  {"slowest_rank", i.slowest_rank},
                  {"max_s", i.max_s},  {"mean_s", i.mean_s},
                  {"min_s", i.min_s},  {"max_over_mean", i.max_over_mean},
                  {"lost_s", i.lost_s}};
    if (auto it = callers.find(row); it != callers.end()) {
      std::string names;
      for (const auto& n : it->second) names += (names.empty() ? "" : ", ") + n;
      c.evidence.emplace_back("same_imbalance_in", names);
      c.summary += fmt::format("; the same imbalance shows in its caller{} {}",
                               it->second.size() == 1 ? "" : "s", names);
    }
    c.advice = std::string(rule.advice);
    c.est_gain_s = i.lost_s;
    out.push_back(std::move(c));
  }
  return out;
}

std::vector<Candidate> comm_exposed(const AdviceInput& in, const Rule& rule) {
  const RankSummary& r = in.ranks;
  if (!r.has_overlap || r.mean_busy_s <= 0 || r.exposed_s < rule.threshold / 100 * r.mean_busy_s)
    return {};
  double hidden =
      r.exposed_s + r.overlapped_s > 0 ? 100 * r.overlapped_s / (r.exposed_s + r.overlapped_s) : 0;
  Candidate c;
  c.rule = std::string(rule.id);
  c.location = "run";
  c.summary = fmt::format(
      "a rank waits {:.3f} s on average inside blocking communication and waits, {:.1f} % of its "
      "busy time; {:.1f} % of its communication overlaps computation",
      r.exposed_s, 100 * r.exposed_s / r.mean_busy_s, hidden);
  c.evidence = {{"ranks", r.ranks},
                {"exposed_s_per_rank", r.exposed_s},
                {"overlapped_s_per_rank", r.overlapped_s},
                {"overlap_pct", hidden},
                {"busy_s_per_rank", r.mean_busy_s}};
  c.advice = std::string(rule.advice);
  // Where DDP or the program's own torch.distributed calls hold most of the wait, the generic
  // advice named what they already do ("DDP's bucketed all-reduce" to a DDP program whose
  // exposed time was its reducer waiting at the end of backward: a red-team find).
  if (r.reducer_wait_s >= 0.5 * r.exposed_s) {
    c.evidence.emplace_back("reducer_wait_s_per_rank", r.reducer_wait_s);
    c.advice =
        "most of it is DDP's reducer waiting at the end of each backward pass for its buckets' "
        "all-reduces: a fast rank waits there for the slowest (see rank-imbalance), and the last "
        "bucket's all-reduce overlaps nothing (a smaller DistributedDataParallel(bucket_cap_mb=) "
        "makes it smaller); with gradient accumulation, DDP's no_sync() on all but the last "
        "micro-batch all-reduces once per step";
  } else if (r.c10d_wait_s >= 0.5 * r.exposed_s) {
    c.evidence.emplace_back("c10d_wait_s_per_rank", r.c10d_wait_s);
    c.advice =
        "most of it is the program's own torch.distributed calls waiting where they are made "
        "(barrier, a blocking all_reduce or broadcast, recv; sonde tree --callers shows "
        "which): one after uneven work waits for the slowest rank (rank 0 evaluating or saving "
        "a checkpoint while the others wait in a barrier): move that work off the step or share "
        "it, and post collectives with async_op=True where the result is needed later";
  }
  c.est_gain_s = 0.5 * r.exposed_s;
  return {c};
}

std::vector<Candidate> small_collectives(const AdviceInput& in, const Rule& rule) {
  const RankSummary& r = in.ranks;
  std::vector<Candidate> out;
  if (r.ranks < 1 || r.mean_busy_s <= 0) return out;
  for (const auto& c : r.collectives) {
    if (out.size() == kMaxPerRule) break;
    double per_rank_s = c.time_s / static_cast<double>(std::max<std::int64_t>(1, c.ranks));
    std::int64_t calls_per_rank = c.calls / std::max<std::int64_t>(1, c.ranks);
    if (c.message_bytes <= 0 || c.message_bytes >= rule.threshold * 1024 || calls_per_rank < 10 ||
        per_rank_s < kMinShare * r.mean_busy_s)
      continue;
    Candidate cand;
    cand.rule = std::string(rule.id);
    cand.location = fmt::format("{} of {} bytes", c.op, c.message_bytes);
    cand.summary = fmt::format(
        "{} calls of {} with {} bytes each per rank take {:.3f} s per rank ({:.1f} us a call): "
        "latency, not bandwidth, sets their time",
        calls_per_rank, c.op, c.message_bytes, per_rank_s, 1e6 * per_rank_s / calls_per_rank);
    cand.evidence = {{"op", c.op},
                     {"message_bytes", c.message_bytes},
                     {"calls_per_rank", calls_per_rank},
                     {"time_s_per_rank", per_rank_s},
                     {"ranks", c.ranks}};
    cand.advice = std::string(rule.advice);
    cand.est_gain_s = 0.5 * per_rank_s;
    out.push_back(std::move(cand));
  }
  return out;
}

}  // namespace sonde::analyzers
