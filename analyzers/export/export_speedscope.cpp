#include <fmt/format.h>

#include <filesystem>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>

#include "export/export.hpp"
#include "export/export_samples.hpp"
#include "export/json_sink.hpp"
#include "export/untraced.hpp"

namespace sonde::analyzers {
namespace {

constexpr const char* kSchema = "https://www.speedscope.app/file-format-schema.json";

// shared.frames: one frame per routine that ran, so a routine called from many paths is one frame
// (what speedscope's left-heavy and sandwich views merge by). The index is the frame's position.
// The sampler's native frames follow, one per distinct name: `native` gets their indices.
std::unordered_map<std::int64_t, std::int64_t> write_frames(
    const ProfileFile& file, const std::vector<SampledStack>& samples,
    std::unordered_map<std::string, std::int64_t>& native, JsonSink& out) {
  std::unordered_map<std::int64_t, std::int64_t> index;
  out.put("\"shared\":{{\"frames\":[");
  auto st = file.prepare(
      "SELECT routine_id, name, CASE WHEN file <> '' THEN file ELSE library END, line "
      "FROM routines WHERE routine_id IN (SELECT routine_id FROM nodes) ORDER BY routine_id");
  while (st.step()) {
    auto i = static_cast<std::int64_t>(index.size());
    index.emplace(st.int64(0), i);
    out.put("{}\n{{\"name\":{}", i == 0 ? "" : ",", json_string(st.text(1)));
    if (std::string where = st.text(2); !where.empty()) out.put(",\"file\":{}", json_string(where));
    if (st.int64(3) > 0) out.put(",\"line\":{}", st.int64(3));
    out.put("}}");
  }
  auto next = static_cast<std::int64_t>(index.size());
  for (const SampledStack& s : samples) {
    for (const std::string& f : s.frames) {
      if (!native.try_emplace(f, next).second) continue;
      out.put("{}\n{{\"name\":{}}}", next++ == 0 ? "" : ",", json_string(f));
    }
  }
  out.put("]}},\n");
  return index;
}

std::string profile_name(const ThreadTree& t) {
  std::string thread = t.thread_name.empty() ? fmt::format("thread {}", t.seq) : t.thread_name;
  // An exec'd image keeps the pid and thread id of the one it replaced: two profiles of one name.
  if (t.earlier_on_track > 0)
    return fmt::format("{} (pid {}, tid {}, image {})", thread, t.pid, t.tid,
                       t.earlier_on_track + 1);
  return fmt::format("{} (pid {}, tid {})", thread, t.pid, t.tid);
}

// Without trace events: a sampled profile per busy thread, one "sample" per call path (root
// first, the thread root left out as in callpaths) weighted by its exclusive nanoseconds, and
// one of the thread root alone, its time in no measured call; the weights add up to the
// thread's time.
struct Samples {
  std::string stacks, weights;
  std::int64_t total = 0;
};

void collect(const CallNode& top, const std::unordered_map<std::int64_t, std::int64_t>& frame,
             std::vector<std::int64_t>& stack, Samples& s) {
  std::size_t base = stack.size();
  // Parents before children: the path to a node is the stack cut at its depth, plus itself.
  for_each_node(top, [&](const CallNode& node, int depth) {
    stack.resize(base + static_cast<std::size_t>(depth));
    stack.push_back(frame.at(node.routine_id));
    if (node.excl_ns > 0) {
      s.stacks += fmt::format("{}[{}]", s.total == 0 ? "" : ",", fmt::join(stack, ","));
      s.weights += fmt::format("{}{}", s.total == 0 ? "" : ",", node.excl_ns);
      s.total += node.excl_ns;
    }
  });
  stack.resize(base);
}

// Returns the index of the profile with the most time (shown first); counts the profiles.
// `only`: where given, the threads to write (the others left out); `suffix`: after each name.
std::int64_t write_sampled(const std::vector<ThreadTree>& threads,
                           const std::unordered_map<std::int64_t, std::int64_t>& frame,
                           JsonSink& out, Progress& progress, std::int64_t& count,
                           const std::set<std::int64_t>* only = nullptr,
                           std::string_view suffix = "") {
  progress.start(static_cast<std::int64_t>(threads.size()), "threads");
  std::int64_t busiest = 0, most = -1;
  for (const ThreadTree& t : threads) {
    if (only != nullptr && only->count(t.thread_id) == 0) continue;
    Samples s;
    std::vector<std::int64_t> stack;
    for (const CallNode& child : t.root.children) collect(child, frame, stack, s);
    progress.advance();
    if (s.total == 0) continue;  // an idle thread: nothing to show
    if (t.root.excl_ns > 0) {
      s.stacks += fmt::format(",[{}]", frame.at(t.root.routine_id));
      s.weights += fmt::format(",{}", t.root.excl_ns);
      s.total += t.root.excl_ns;
    }
    if (s.total > most) most = s.total, busiest = count;
    out.put(
        "{}\n{{\"type\":\"sampled\",\"name\":{},\"unit\":\"nanoseconds\",\"startValue\":0,"
        "\"endValue\":{},\"samples\":[{}],\"weights\":[{}]}}",
        count++ == 0 ? "" : ",", json_string(profile_name(t) + std::string(suffix)), s.total,
        s.stacks, s.weights);
  }
  return busiest;
}

// With trace events: an evented profile per thread, each event an open and a close of its
// routine's frame at its start and end, in nanoseconds from the file's first event. speedscope
// needs them balanced and in time order. Events of one thread can overlap without nesting by
// tens of microseconds: each flush converts ticks to nanoseconds with the ratio measured so far,
// so a long call written at a later flush than its first child can appear to start after it
// (torch_cnn's trace: 97 pairs, by up to 60 us). The open frame that ends inside the new event
// is then closed where the new one starts: 0.38 s of the trace's event time is lost that way,
// where cutting the new event at the open frame's end lost 83 s (a 15 s import became 46 us).
std::int64_t write_evented(const ProfileFile& file, const std::vector<ThreadTree>& threads,
                           const std::unordered_map<std::int64_t, std::int64_t>& frame,
                           JsonSink& out, Progress& progress, std::int64_t& count) {
  std::unordered_map<std::int64_t, const ThreadTree*> thread_of;
  for (const ThreadTree& t : threads) thread_of.emplace(t.thread_id, &t);
  {
    auto st = file.prepare("SELECT COUNT(*) FROM trace_events");
    progress.start(st.step() ? st.int64(0) : 0, "events");
  }
  auto st = file.prepare(
      "SELECT e.thread_id, e.start_ns - (SELECT MIN(start_ns) FROM trace_events), "
      "       e.end_ns - (SELECT MIN(start_ns) FROM trace_events), n.routine_id "
      "FROM trace_events e JOIN nodes n USING (node_id) "
      "ORDER BY e.thread_id, e.start_ns, e.end_ns DESC");
  struct Open {
    std::int64_t frame, end;
  };
  std::vector<Open> stack;
  std::int64_t thread = -1, first = 0, last = 0, busiest = 0, longest = -1;
  bool first_event = true;
  auto close_until = [&](std::int64_t at) {
    while (!stack.empty() && stack.back().end <= at) {
      out.put(",{{\"type\":\"C\",\"frame\":{},\"at\":{}}}", stack.back().frame, stack.back().end);
      stack.pop_back();
    }
  };
  auto end_profile = [&] {
    close_until(INT64_MAX);
    out.put("],\"startValue\":{},\"endValue\":{}}}", first, last);
    if (last - first > longest) longest = last - first, busiest = count - 1;
  };
  while (st.step()) {
    std::int64_t start = st.int64(1), end = st.int64(2);
    if (st.int64(0) != thread) {
      if (thread != -1) end_profile();
      thread = st.int64(0);
      auto t = thread_of.find(thread);
      std::string name =
          t != thread_of.end() ? profile_name(*t->second) : fmt::format("thread {}", thread);
      out.put("{}\n{{\"type\":\"evented\",\"name\":{},\"unit\":\"nanoseconds\",\"events\":[",
              count++ == 0 ? "" : ",", json_string(name));
      first = start;
      last = end;
      first_event = true;
    }
    close_until(start);
    while (!stack.empty() && stack.back().end < end) {
      out.put(",{{\"type\":\"C\",\"frame\":{},\"at\":{}}}", stack.back().frame, start);
      stack.pop_back();
    }
    std::int64_t f = frame.at(st.int64(3));
    out.put("{}{{\"type\":\"O\",\"frame\":{},\"at\":{}}}", first_event ? "" : ",", f, start);
    first_event = false;
    stack.push_back({f, end});
    last = std::max(last, end);
    progress.advance();
  }
  if (thread != -1) end_profile();
  return busiest;
}

// The sampler's samples: one more profile per sampled thread, named "... [sampled]", weights
// in samples (unit "none"), never added into the exact profiles above.
void write_sampler_profiles(const std::vector<ThreadTree>& threads,
                            const std::vector<SampledStack>& samples,
                            const std::unordered_map<std::int64_t, std::int64_t>& frame,
                            const std::unordered_map<std::string, std::int64_t>& native,
                            JsonSink& out, std::int64_t& count) {
  std::unordered_map<std::int64_t, const ThreadTree*> thread_of;
  for (const ThreadTree& t : threads) thread_of.emplace(t.thread_id, &t);
  for (std::size_t i = 0; i < samples.size();) {
    std::int64_t thread = samples[i].thread_id, total = 0;
    std::string stacks, weights;
    std::vector<std::int64_t> stack;
    for (; i < samples.size() && samples[i].thread_id == thread; ++i) {
      const SampledStack& s = samples[i];
      stack.clear();
      for (std::int64_t r : s.routines) stack.push_back(frame.at(r));
      for (const std::string& f : s.frames) stack.push_back(native.at(f));
      stacks += fmt::format("{}[{}]", total == 0 ? "" : ",", fmt::join(stack, ","));
      weights += fmt::format("{}{}", total == 0 ? "" : ",", s.count);
      total += s.count;
    }
    auto t = thread_of.find(thread);
    std::string name =
        t != thread_of.end() ? profile_name(*t->second) : fmt::format("thread {}", thread);
    out.put(
        "{}\n{{\"type\":\"sampled\",\"name\":{},\"unit\":\"none\",\"startValue\":0,"
        "\"endValue\":{},\"samples\":[{}],\"weights\":[{}]}}",
        count++ == 0 ? "" : ",", json_string(name + " [sampled]"), total, stacks, weights);
  }
}

}  // namespace

void write_speedscope(const ProfileFile& file, std::ostream& out, Progress* progress) {
  Progress silent;
  Progress& p = progress != nullptr ? *progress : silent;
  std::vector<ThreadTree> threads = load_thread_trees(file);
  bool has_events = file.has_rows("trace_events");
  JsonSink sink(out);
  sink.put("{{\"$schema\":\"{}\",\"exporter\":\"sonde\",\"name\":{},\n", kSchema,
           json_string(std::filesystem::path(file.path()).filename().string()));
  std::vector<SampledStack> samples = sampled_stacks(file);
  std::unordered_map<std::string, std::int64_t> native;
  auto frame = write_frames(file, samples, native, sink);
  sink.put("\"profiles\":[");
  std::int64_t count = 0;
  std::int64_t active = has_events ? write_evented(file, threads, frame, sink, p, count)
                                   : write_sampled(threads, frame, sink, p, count);
  if (has_events) {
    // Processes without trace events (tracing off in a child's environment, a file merged from
    // traced and untraced runs) were left out: their threads' aggregated trees, named so.
    std::set<std::int64_t> untraced = load_untraced(file).threads;
    Progress silent;  // counted in events above
    if (!untraced.empty())
      write_sampled(threads, frame, sink, silent, count, &untraced,
                    " [aggregated call tree, no trace events]");
  }
  write_sampler_profiles(threads, samples, frame, native, sink, count);
  // Nothing measured (a program that made no call sonde sees): one empty profile, which
  // speedscope opens, rather than none, which it refuses.
  if (count == 0) {
    sink.put(
        "\n{{\"type\":\"sampled\",\"name\":\"no calls recorded\",\"unit\":\"nanoseconds\","
        "\"startValue\":0,\"endValue\":0,\"samples\":[],\"weights\":[]}}");
  }
  sink.put("\n],\n\"activeProfileIndex\":{}}}\n", active);
  p.finish();
}

}  // namespace sonde::analyzers
