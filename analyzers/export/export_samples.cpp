#include "export/export_samples.hpp"

#include <fmt/format.h>

#include <map>

namespace sonde::analyzers {
namespace {

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> out;
  if (text.empty()) return out;
  for (std::size_t at = 0; at <= text.size();) {
    std::size_t end = std::min(text.find(sep, at), text.size());
    out.push_back(text.substr(at, end - at));
    at = end + 1;
  }
  return out;
}

bool sampled(const ProfileFile& file) { return file.has_table("samples"); }

std::unordered_map<std::int64_t, std::string> routine_names(const ProfileFile& file) {
  std::unordered_map<std::int64_t, std::string> names;
  auto st = file.prepare("SELECT routine_id, name FROM routines");
  while (st.step()) names.emplace(st.int64(0), st.text(1));
  return names;
}

// A merged tree of sampled frames (node path names, then native frames), samples inclusive.
struct Trie {
  std::int64_t count = 0;
  std::map<std::string, Trie> children;
};

void lay_out(const Trie& node, const std::string& name, std::int64_t start, double ns_per_sample,
             const ThreadLabel& label, const std::function<void(const std::string&)>& add) {
  add(
      fmt::format("{{\"ph\":\"X\",\"name\":{},\"cat\":\"sampled\",\"ts\":{},\"dur\":{},"
                  "\"pid\":{},\"tid\":{},\"args\":{{\"samples\":{}}}}}",
                  json_string(name), Micros{std::int64_t(start * ns_per_sample)},
                  Micros{std::int64_t(node.count * ns_per_sample)}, label.pid,
                  label.tid + kSampledTrack, node.count));
  std::int64_t next = start;
  for (const auto& [child_name, child] : node.children) {
    lay_out(child, child_name, next, ns_per_sample, label, add);
    next += child.count;
  }
}

}  // namespace

std::vector<SampledStack> sampled_stacks(const ProfileFile& file) {
  std::vector<SampledStack> out;
  if (!sampled(file)) return out;
  auto st = file.prepare(
      "SELECT s.thread_id, COALESCE(p.path_ids, ''), s.frames, s.count FROM sampled_paths s "
      "LEFT JOIN node_paths p USING (node_id) ORDER BY s.thread_id, s.path, s.frames");
  while (st.step()) {
    SampledStack s;
    s.thread_id = st.int64(0);
    for (const std::string& id : split(st.text(1), '/')) s.routines.push_back(std::stoll(id));
    s.frames = split(st.text(2), ';');  // the store writes no ';' inside a frame's name
    s.count = st.int64(3);
    out.push_back(std::move(s));
  }
  return out;
}

double sample_hz(const ProfileFile& file) {
  auto st = file.prepare("SELECT value FROM run_info WHERE key = 'sample.hz' LIMIT 1");
  return st.step() ? std::atof(st.text(0).c_str()) : 0.0;
}

void write_folded_samples(const ProfileFile& file, std::ostream& out) {
  auto names = routine_names(file);
  std::map<std::string, std::int64_t> lines;  // merged over threads, sorted by stack
  for (const SampledStack& s : sampled_stacks(file)) {
    std::string line;
    for (std::int64_t r : s.routines) line += (line.empty() ? "" : ";") + folded_frame(names[r]);
    for (const std::string& f : s.frames) line += (line.empty() ? "" : ";") + folded_frame(f);
    lines[line.empty() ? "<thread>" : line] += s.count;
  }
  for (const auto& [line, count] : lines) out << line << ' ' << count << '\n';
}

void write_samples_json(const ProfileFile& file, std::ostream& out) {
  Json rows = Json::array();
  std::int64_t total = 0;
  if (sampled(file)) {
    auto names = routine_names(file);
    // The path's frames by routine, from one of its nodes: its text joins the names with ';',
    // which a name may hold (a file `semi;name.py` split into two frames).
    auto st = file.prepare(
        "SELECT c.path, c.frames, c.leaf, c.count, c.share, c.share_err, "
        "(SELECT p.path_ids FROM sampled_paths s JOIN node_paths p USING (node_id) "
        "WHERE s.path = c.path LIMIT 1) FROM sampled_callpaths c "
        "ORDER BY c.count DESC, c.path, c.frames");
    while (st.step()) {
      total += st.int64(3);
      Json path = Json::array();
      for (const std::string& id : split(st.text(6), '/')) path.push_back(names[std::stoll(id)]);
      rows.push_back({{"path", std::move(path)},
                      {"frames", split(st.text(1), ';')},
                      {"leaf", st.text(2)},
                      {"samples", st.int64(3)},
                      {"share", st.real(4)},
                      {"share_err", st.real(5)}});
    }
  }
  double hz = sample_hz(file);
  Json j{{"format_version", 1},
         {"sampled", hz > 0 || total > 0},
         {"hz", hz > 0 ? Json(hz) : Json(nullptr)},
         {"samples", total},
         {"paths", std::move(rows)}};
  out << dump_json(j, 1) << '\n';
}

void write_sampled_tracks(const ProfileFile& file,
                          const std::unordered_map<std::int64_t, ThreadLabel>& labels,
                          const std::function<void(const std::string&)>& add) {
  std::vector<SampledStack> stacks = sampled_stacks(file);
  if (stacks.empty()) return;
  double hz = sample_hz(file);
  double ns_per_sample = hz > 0 ? 1e9 / hz : 1e6;  // unknown rate: 1 ms a sample
  auto names = routine_names(file);
  std::map<std::int64_t, Trie> per_thread;
  for (const SampledStack& s : stacks) {
    Trie* node = &per_thread[s.thread_id];
    node->count += s.count;
    for (std::int64_t r : s.routines) (node = &node->children[names[r]])->count += s.count;
    for (const std::string& f : s.frames) (node = &node->children[f])->count += s.count;
  }
  for (const auto& [thread_id, root] : per_thread) {
    auto it = labels.find(thread_id);
    if (it == labels.end()) continue;
    const ThreadLabel& label = it->second;
    add(
        fmt::format("{{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":{},\"tid\":{},"
                    "\"args\":{{\"name\":{}}}}}",
                    label.pid, label.tid + kSampledTrack,
                    json_string(label.name + " [sampled, not a timeline]")));
    lay_out(root, "<thread> [sampled]", 0, ns_per_sample, label, add);
  }
}

}  // namespace sonde::analyzers
