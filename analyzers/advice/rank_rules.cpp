#include "advice/rank_rules.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <tuple>

#include "sonde/routine_kinds.hpp"

namespace sonde::analyzers {
namespace {

// Candidates of one rule at most: the nested phases of one imbalance would repeat it.
constexpr std::size_t kMaxPerRule = 3;
// Below this share of a rank's busy time a figure is noise, whatever the ratio says.
constexpr double kMinShare = 0.01;

// A callee that holds at least this share of its caller's lost time is the same imbalance.
constexpr double kSameImbalance = 0.9;
// What is left after that: a row above or beneath a candidate holding at least this share of
// its lost time is the candidate's imbalance seen at another depth, named in it.
constexpr double kSameDepths = 0.5;

// Ranks sharing a host with other programs that leave them fewer cores than there are ranks
// (others_load, measured over the run: advice/candidates.hpp): a rank waiting for a slower one
// may hand its core to it and to the others, and then spreading the work evenly, or hiding the
// wait, frees nothing the host has. A red-team DDP pair on 2 cores beside one busy loop, rank
// 1's sequences twice rank 0's, was told the work spread evenly would end each rank 0.646 s
// sooner and communication overlapped 0.809 s; spread evenly, it ran 6.69-6.72 s against
// 6.47-6.84. Said, with the figures; the estimate stands, since work that waits on no CPU (a
// sleep, I/O) does gain, and sonde cannot tell which from the load alone. Ranks alone more
// than the cores (4 on 2, no other program) are not this: their own imbalance is the rule's.
void oversubscribed_host(Candidate& c, const AdviceInput& in) {
  const RunFacts& f = in.metrics.facts;
  auto cores = f.available_cores();
  constexpr double kOthers = 0.5;  // cores' worth of other programs, measured
  if (!in.others_load || *in.others_load < kOthers || !cores || f.ranks_on_host < 2) return;
  double left = std::max(0.0, static_cast<double>(*cores) - *in.others_load);
  if (left >= static_cast<double>(f.ranks_on_host)) return;
  c.evidence.emplace_back("others_load", *in.others_load);
  c.evidence.emplace_back("cores_left_by_others", left);
  c.summary += fmt::format(
      "; but other programs kept about {:.1f} of the host's {} cores busy over the run, "
      "leaving its {} ranks {:.1f}: where the work is on the CPU, a waiting rank's core ran "
      "theirs, and evening the work out gains only what cores are free (measure it)",
      *in.others_load, *cores, f.ranks_on_host, left);
}

// The same work on every rank, run slower on one: repartitioning changes nothing there.
constexpr std::string_view kSameWorkAdvice =
    "every rank made the same calls of {} with the same FLOPs and bytes, so the slow rank did "
    "not have more of it: it ran it slower. Where that holds in a second run, look at where "
    "the rank ran: ranks sharing cores (bind each to its own: torchrun's or mpirun's binding, "
    "taskset), more threads per rank than its cores (OMP_NUM_THREADS, torch.set_num_threads, "
    "OPENBLAS_NUM_THREADS = cores / ranks), other programs on its cores, a slower socket or "
    "clock; where it does not, it was a passing load and there is nothing to gain";

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
  // A callee at any depth counts (forward above aten::linear above sgemm_).
  auto above = [&](std::size_t a, std::size_t b) {
    return r.above.count({rows[a]->routine_id, rows[b]->routine_id}) > 0;
  };
  auto same_below = [&](std::size_t caller) -> std::optional<std::size_t> {
    for (std::size_t callee = 0; callee < rows.size(); ++callee) {
      // Two routines above each other (recursion through both) collapse one way only: into
      // the one listed later, the smaller lost time.
      bool mutual = above(callee, caller);
      if (above(caller, callee) && (!mutual || callee > caller) &&
          rows[callee]->lost_s >= kSameImbalance * rows[caller]->lost_s)
        return callee;
    }
    return std::nullopt;
  };
  std::map<std::size_t, std::vector<std::string>> callers, beneath;
  std::vector<bool> collapsed(rows.size(), false);
  std::vector<std::size_t> target(rows.size());
  for (std::size_t row = 0; row < rows.size(); ++row) {
    std::size_t deepest = row;
    std::set<std::size_t> seen{row};
    bool cycle = false;  // a longer ring of calls: no deepest, each is kept
    while (auto below = same_below(deepest)) {
      if ((cycle = !seen.insert(*below).second)) break;
      deepest = *below;
    }
    target[row] = cycle ? row : deepest;
    if (deepest == row || cycle) continue;
    collapsed[row] = true;
    callers[deepest].push_back(rows[row]->routine);
  }
  // A frame above several independent imbalances that together hold (nearly) all of its lost
  // time (main above a slow loader and a slow optimizer) is their caller, not a cause: each is
  // a candidate, naming it.
  auto related = [&](std::size_t a, std::size_t b) { return above(a, b) || above(b, a); };
  for (std::size_t row = 0; row < rows.size(); ++row) {
    if (collapsed[row]) continue;
    std::vector<std::size_t> parts;
    double held = 0;
    for (std::size_t b = 0; b < rows.size(); ++b) {
      if (b == row || !above(row, b) || above(b, row)) continue;
      if (std::any_of(parts.begin(), parts.end(), [&](std::size_t p) { return related(p, b); }))
        continue;
      parts.push_back(b);
      held += rows[b]->lost_s;
    }
    if (parts.size() < 2 || held < kSameImbalance * rows[row]->lost_s) continue;
    collapsed[row] = true;
    // Once each: two parts may end at one row (forward and backward both collapsing to
    // cblas_dgemm), and a red team's summary named `<module>` twice.
    std::set<std::size_t> named;
    for (std::size_t p : parts)
      if (named.insert(target[p]).second) callers[target[p]].push_back(rows[row]->routine);
  }
  // What remains of one imbalance seen at several depths (a frame that holds more than its
  // callee, so neither is the other's 90 %): the first listed, the most time lost, is the
  // candidate, and a row above or beneath it holding at least half its lost time is named in
  // it, its time not counted again (one rank's extra forward passes were three candidates,
  // forward, aten::linear and sgemm_, whose gains summed to 2.6 times the time lost). A smaller
  // one beneath is an imbalance of its own inside a frame that has more (a `<module>` that slept
  // 1 s on one rank before its rendezvous, above a region computing 5 times the other's work).
  std::vector<std::size_t> kept;
  for (std::size_t row = 0; row < rows.size(); ++row) {
    if (collapsed[row]) continue;
    auto host = std::find_if(kept.begin(), kept.end(), [&](std::size_t k) {
      return related(k, row) && rows[row]->lost_s >= kSameDepths * rows[k]->lost_s;
    });
    if (host == kept.end()) {
      kept.push_back(row);
    } else {
      auto& list = above(*host, row) ? beneath[*host] : callers[*host];
      list.push_back(fmt::format("{} ({:.3f} s)", rows[row]->routine, rows[row]->lost_s));
    }
  }
  for (std::size_t row : kept) {
    const Row& i = *rows[row];
    if (out.size() == kMaxPerRule) break;
    Candidate c;
    c.rule = std::string(rule.id);
    c.location = fmt::format("{} [{}]", i.routine, i.kind);
    // The fastest rank waits max - min; what balancing the work gains each rank is max - mean,
    // the gain (two ranks: half that wait). Said as "the others wait" max - mean, a red-team
    // run's 0.806 s wait read 0.403 s.
    c.summary = fmt::format(
        "rank {} spends {:.3f} s in {} outside communication, {:.2f}x the mean over {} ranks "
        "({:.3f} s): the fastest waits up to {:.3f} s for it where they next synchronise, and "
        "the work spread evenly would end each rank {:.3f} s sooner",
        i.slowest_rank, i.max_s, i.routine, i.max_over_mean, r.ranks, i.mean_s, i.max_s - i.min_s,
        i.lost_s);
    c.evidence = {{"ranks", r.ranks},  {"slowest_rank", i.slowest_rank},
                  {"max_s", i.max_s},  {"mean_s", i.mean_s},
                  {"min_s", i.min_s},  {"max_over_mean", i.max_over_mean},
                  {"lost_s", i.lost_s}};
    // The evidence names every one; the summary the first few (a DDP step's sgemm_ had twelve
    // callers, DDP's wrappers among them).
    auto names = [](const std::vector<std::string>& list, std::size_t most) {
      std::string text;
      for (std::size_t k = 0; k < list.size() && k < most; ++k) text += (k ? ", " : "") + list[k];
      if (list.size() > most) text += fmt::format(" and {} more", list.size() - most);
      return text;
    };
    constexpr std::size_t kNamed = 4;
    if (auto it = callers.find(row); it != callers.end()) {
      c.evidence.emplace_back("same_imbalance_in", names(it->second, it->second.size()));
      c.summary += fmt::format("; the same imbalance shows in its caller{} {}",
                               it->second.size() == 1 ? "" : "s", names(it->second, kNamed));
    }
    if (auto it = beneath.find(row); it != beneath.end()) {
      c.evidence.emplace_back("imbalance_beneath", names(it->second, it->second.size()));
      c.summary += fmt::format("; beneath it, time lost in {}", names(it->second, kNamed));
    }
    c.advice = std::string(rule.advice);
    if (i.same_work) {
      c.evidence.emplace_back("same_work",
                              std::string("calls, FLOPs and bytes equal on every rank"));
      c.summary += "; every rank made the same calls with the same FLOPs and bytes";
      c.advice = fmt::format(fmt::runtime(kSameWorkAdvice), i.routine);
    }
    c.est_gain_s = i.lost_s;
    oversubscribed_host(c, in);
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
  double gain_s = 0.5 * r.exposed_s;
  // Where DDP or the program's own torch.distributed calls hold most of the wait, the generic
  // advice named what they already do ("DDP's bucketed all-reduce" to a DDP program whose
  // exposed time was its reducer waiting at the end of backward: a red-team find).
  if (r.reducer_wait_s >= 0.5 * r.exposed_s) {
    c.evidence.emplace_back("reducer_wait_s_per_rank", r.reducer_wait_s);
    c.evidence.emplace_back("reducer_wait_least_rank_s", r.reducer_wait_least_s);
    c.advice =
        "most of it is DDP's reducer waiting at the end of each backward pass for its buckets' "
        "all-reduces: a fast rank waits there for the slowest (see rank-imbalance), and the last "
        "bucket's all-reduce overlaps nothing (a smaller DistributedDataParallel(bucket_cap_mb=) "
        "makes it smaller)";
    // The slowest rank waits least: what it waits is the all-reduces' own; the others' more is
    // their wait for it, the imbalance's, which rank-imbalance counts and no bucket size
    // shrinks (a red-team pair's 1.614 s a rank was 0.790 s of that and 0.824 s the slowest's
    // own, and the gain counted both).
    double imbalance = r.reducer_wait_s - r.reducer_wait_least_s;
    if (r.ranks > 1 && imbalance >= 0.25 * r.reducer_wait_s) {
      c.evidence.emplace_back("reducer_wait_imbalance_s_per_rank", imbalance);
      c.advice = fmt::format(
          "most of it is DDP's reducer waiting at the end of each backward pass ({:.3f} s a "
          "rank): {:.3f} s of that the faster ranks waiting for the slowest, the imbalance's (see "
          "rank-imbalance), which no bucket size shrinks; {:.3f} s the slowest rank's own wait "
          "for its last buckets' all-reduces, which overlap nothing (a smaller "
          "DistributedDataParallel(bucket_cap_mb=) makes the last one smaller)",
          r.reducer_wait_s, imbalance, r.reducer_wait_least_s);
      gain_s = 0.5 * std::max(0.0, r.exposed_s - imbalance);
    }
    // DDP's no_sync() ran (its frame in torch/nn/parallel/distributed.py): the program
    // accumulates already, and was told to (a red-team find).
    bool no_sync = std::any_of(
        in.metrics.routines.begin(), in.metrics.routines.end(), [](const RoutineMetrics& x) {
          return x.kind == kinds::kPython && x.name.starts_with("distributed.py:") &&
                 x.name.ends_with("(no_sync)");
        });
    if (!no_sync)
      c.advice +=
          "; with gradient accumulation, DDP's no_sync() on all but the last micro-batch "
          "all-reduces once per step";
  } else if (r.work_wait_s >= 0.5 * r.exposed_s) {
    // The program's own Work.wait() on collectives it posted with async_op=True: told to
    // "start nonblocking collectives", which it does (a review's find). As the reducer's, the
    // slowest rank waits least; the others' more is their wait for it, rank-imbalance's.
    double imbalance = r.work_wait_s - r.work_wait_least_s;
    c.evidence.emplace_back("work_wait_s_per_rank", r.work_wait_s);
    c.evidence.emplace_back("work_wait_least_rank_s", r.work_wait_least_s);
    c.advice = fmt::format(
        "most of it is the program's own work.wait() on collectives it posted with "
        "async_op=True ({:.3f} s a rank): {:.3f} s of that the faster ranks waiting for the "
        "slowest, the imbalance's (see rank-imbalance); {:.3f} s the slowest rank's own, the "
        "collectives' time left in view: post them earlier or wait for them later, with "
        "computation that does not need their result in between",
        r.work_wait_s, imbalance, r.work_wait_least_s);
    if (r.ranks > 1) gain_s = 0.5 * std::max(0.0, r.exposed_s - imbalance);
  } else {
    bool c10d = r.c10d_wait_s >= 0.5 * r.exposed_s;
    if (c10d) {
      c.evidence.emplace_back("c10d_wait_s_per_rank", r.c10d_wait_s);
      c.advice =
          "most of it is the program's own torch.distributed calls waiting where they are made "
          "(barrier, a blocking all_reduce or broadcast, recv; sonde tree --callers shows "
          "which): one after uneven work waits for the slowest rank (rank 0 evaluating or "
          "saving a checkpoint while the others wait in a barrier): move that work off the step "
          "or share it, and post collectives with async_op=True where the result is needed "
          "later";
    }
    // As the reducer's: the slowest rank exposes least, what the communication costs it; the
    // others' more is their wait for it, the imbalance's, which no overlap hides. A red team's
    // MPI ranks, one doing 3 x the other's work before a Barrier and an Allreduce, were told
    // 0.251 s from nonblocking collectives; posted before the work, they gained nothing.
    double imbalance = r.exposed_s - r.exposed_least_s;
    if (r.ranks > 1 && imbalance >= 0.25 * r.exposed_s) {
      c.evidence.emplace_back("exposed_least_rank_s", r.exposed_least_s);
      c.evidence.emplace_back("exposed_imbalance_s_per_rank", imbalance);
      c.advice =
          imbalance >= 0.5 * r.exposed_s && !c10d
              ? fmt::format(
                    "most of it, {:.3f} s a rank, is the faster ranks waiting for the slowest, "
                    "the imbalance's (see rank-imbalance), which no overlap hides; the "
                    "communication's own cost is the slowest rank's {:.3f} s, of which "
                    "nonblocking collectives waited on only where their result is needed may "
                    "hide about half",
                    imbalance, r.exposed_least_s)
              : fmt::format(
                    "{}; {:.3f} s of it a rank is the faster ranks waiting for the slowest, the "
                    "imbalance's (see rank-imbalance), which no overlap hides",
                    c.advice, imbalance);
      gain_s = 0.5 * std::max(0.0, r.exposed_s - imbalance);
    }
  }
  c.est_gain_s = gain_s;
  oversubscribed_host(c, in);
  return {c};
}

std::vector<Candidate> small_collectives(const AdviceInput& in, const Rule& rule) {
  const RankSummary& r = in.ranks;
  std::vector<Candidate> out;
  if (r.ranks < 1 || r.mean_busy_s <= 0) return out;
  // One operation's small messages together, whatever their sizes: a per-parameter all-reduce
  // has a size per layer shape, and judged one size at a time a red-team loop of 10 sizes
  // (1.96 s blocked a rank) fired nothing, one of 2 sizes two candidates of 0.24 s each.
  struct Group {
    std::string op;
    std::int64_t calls = 0, ranks = 0, smallest = 0, largest = 0, sizes = 0;
    double time_s = 0;
    std::map<std::int64_t, double> rank_s;
    bool per_rank_known = true;
  };
  std::vector<Group> groups;
  std::map<std::tuple<std::string, std::int64_t, std::int64_t>, std::size_t> index;
  for (const auto& c : r.collectives) {
    if (c.message_bytes <= 0 || c.message_bytes >= rule.threshold * 1024) continue;
    auto [it, added] = index.try_emplace({c.op, c.blocking, c.comm_size}, groups.size());
    if (added) groups.push_back(Group{c.op, 0, 0, c.message_bytes, c.message_bytes});
    Group& g = groups[it->second];
    g.calls += c.calls;
    g.ranks = std::max(g.ranks, c.ranks);
    g.smallest = std::min(g.smallest, c.message_bytes);
    g.largest = std::max(g.largest, c.message_bytes);
    ++g.sizes;
    g.time_s += c.time_s;
    if (c.rank_s.empty()) g.per_rank_known = false;
    for (const auto& [rank, s] : c.rank_s) g.rank_s[rank] += s;
  }
  struct Judged {
    const Group* g;
    double per_rank_s;
    std::int64_t calls_per_rank;
  };
  std::vector<Judged> judged;
  for (const Group& g : groups) {
    // With the waits in torch.distributed's frames around them, on the rank waiting least: a
    // blocking all_reduce's own time is its posting, and 300 scalar all-reduces a rank (240 us
    // each by hand, 3.4 % of its time) read 30 us and fired nothing (a red-team find). The
    // least rank's alone: the mean holds the others' wait for a slow rank (a red-team run's 10
    // all-reduces of 80 bytes read 0.574 s a rank, 0.030 s on the slow rank that waited for
    // none, and were told to fuse them; rank-imbalance names that wait).
    double per_rank_s = g.time_s / static_cast<double>(std::max<std::int64_t>(1, g.ranks));
    if (g.per_rank_known && !g.rank_s.empty()) {
      per_rank_s = g.rank_s.begin()->second;
      for (const auto& [rank, s] : g.rank_s) per_rank_s = std::min(per_rank_s, s);
    }
    std::int64_t calls_per_rank = g.calls / std::max<std::int64_t>(1, g.ranks);
    if (calls_per_rank < 10 || per_rank_s < kMinShare * r.mean_busy_s) continue;
    judged.push_back({&g, per_rank_s, calls_per_rank});
  }
  std::stable_sort(judged.begin(), judged.end(),
                   [](const Judged& a, const Judged& b) { return a.per_rank_s > b.per_rank_s; });
  for (const Judged& j : judged) {
    if (out.size() == kMaxPerRule) break;
    const Group& g = *j.g;
    std::int64_t calls_per_rank = j.calls_per_rank;
    std::string sizes =
        g.sizes == 1 ? fmt::format("{} bytes", g.largest)
                     : fmt::format("{} sizes, {} to {} bytes", g.sizes, g.smallest, g.largest);
    Candidate cand;
    cand.rule = std::string(rule.id);
    cand.location = fmt::format("{} of {}", g.op, sizes);
    std::string messages = g.sizes == 1 ? fmt::format("{} bytes each", g.largest)
                                        : fmt::format("messages of {} to {} bytes ({} sizes)",
                                                      g.smallest, g.largest, g.sizes);
    cand.summary = fmt::format(
        "{} calls of {} with {} per rank take {:.3f} s per rank ({:.1f} us a call, with the "
        "waits around them on the rank waiting least): latency, not bandwidth, sets their time",
        calls_per_rank, g.op, messages, j.per_rank_s, 1e6 * j.per_rank_s / double(calls_per_rank));
    cand.evidence = {{"op", g.op},
                     {"message_bytes", g.largest},
                     {"calls_per_rank", calls_per_rank},
                     {"time_s_per_rank", j.per_rank_s},
                     {"ranks", g.ranks}};
    if (g.sizes > 1) {
      cand.evidence.emplace_back("message_sizes", g.sizes);
      cand.evidence.emplace_back("smallest_message_bytes", g.smallest);
    }
    cand.advice = std::string(rule.advice);
    cand.est_gain_s = 0.5 * j.per_rank_s;
    out.push_back(std::move(cand));
  }
  return out;
}

}  // namespace sonde::analyzers
