#include "render/tree.hpp"

#include <fmt/format.h>

#include <functional>
#include <ostream>
#include <set>

namespace sonde::analyzers {
namespace {

constexpr std::string_view kColumns = "  incl %     incl s     excl s       calls  name\n";
// With GPU activity in the file: the device time launched from each path, beside (never
// inside) its CPU time.
constexpr std::string_view kGpuColumns =
    "  incl %     incl s     excl s      gpu s       calls  name\n";
// With CUDA graph replays whose capture paths are known: their device time at those paths too.
constexpr std::string_view kGraphColumns =
    "  incl %     incl s     excl s      gpu s    graph s       calls  name\n";
constexpr std::string_view kGraphLegend =
    "graph s: device time of CUDA graph replays whose graph nodes were captured (created) at "
    "this path; the same time is in gpu s of the call that replayed them (cudaGraphLaunch)\n";

// Which device-time columns a tree shows.
struct GpuColumns {
  bool gpu = false, graph = false;
};
std::string_view columns_line(GpuColumns c) {
  return c.graph ? kGraphColumns : c.gpu ? kGpuColumns : kColumns;
}

double pct(std::int64_t part, std::int64_t total) {
  return total > 0 ? 100.0 * static_cast<double>(part) / static_cast<double>(total) : 0.0;
}

double seconds(std::int64_t ns) { return static_cast<double>(ns) / 1e9; }

// Splits children into those shown and the sum of those folded below the threshold.
struct Visible {
  std::vector<const CallNode*> shown;
  int folded = 0;
  std::int64_t folded_incl_ns = 0;
  std::int64_t folded_excl_ns = 0;
  std::int64_t folded_calls = 0;
  std::int64_t folded_gpu_ns = 0;
  std::int64_t folded_graph_ns = 0;
};

Visible visible_children(const CallNode& node, std::int64_t total, const TreeOptions& o) {
  Visible v;
  // Children the loader left in the file were below its threshold: folded here too.
  const CallNode::Rare::Unloaded& unloaded = node.rare.get().unloaded;
  v.folded = static_cast<int>(unloaded.count);
  v.folded_incl_ns = unloaded.incl_ns;
  v.folded_excl_ns = unloaded.excl_ns;
  v.folded_calls = unloaded.calls;
  for (const CallNode& child : node.children) {
    if (pct(child.incl_ns, total) >= o.min_pct) {
      v.shown.push_back(&child);
    } else {
      ++v.folded;
      v.folded_incl_ns += child.incl_ns;
      v.folded_excl_ns += child.excl_ns;
      v.folded_calls += child.calls;
      v.folded_gpu_ns += child.gpu_ns;
      v.folded_graph_ns += child.graph_ns;
    }
  }
  return v;
}

std::string gpu_cells(GpuColumns c, std::int64_t gpu_ns, std::int64_t graph_ns) {
  std::string out = c.gpu ? fmt::format("{:>9.3f}  ", seconds(gpu_ns)) : std::string();
  if (c.graph) out += fmt::format("{:>9.3f}  ", seconds(graph_ns));
  return out;
}

// Siblings of one name and kind are different routines: each says where it is.
std::set<std::pair<std::string, std::string>> shared_names(const std::vector<const CallNode*>& v) {
  std::set<std::pair<std::string, std::string>> seen, twice;
  for (const CallNode* c : v)
    if (!seen.insert({c->name, c->kind}).second) twice.insert({c->name, c->kind});
  return twice;
}

std::string label(const CallNode& node, bool ambiguous) {
  std::string out = fmt::format("{} [{}]", node.name, node.kind);
  if (ambiguous && !node.where.empty()) out += " " + node.where.str();
  return out;
}

// Levels drawn with guides: below them a line keeps the indentation of this level and says its
// own, so a 20,000-deep recursion prints 20,000 lines, not 600 MB of indentation.
constexpr int kDrawnLevels = 64;

void text_tree(std::string& out, const CallNode& root, std::int64_t total, const TreeOptions& o,
               GpuColumns gpu) {
  // A line of the tree still to print: a node with its indentation, or the folded line its
  // parent left after its shown children. Kept on a stack, not the call stack.
  struct Item {
    const CallNode* node;  // nullptr: `text` is a folded line, printed as it is
    int depth;
    std::string prefix, branch, text;
    bool ambiguous;
  };
  std::vector<Item> todo;
  todo.push_back({&root, 0, "", "", "", false});
  while (!todo.empty()) {
    Item item = std::move(todo.back());
    todo.pop_back();
    if (item.node == nullptr) {
      out += item.text;
      continue;
    }
    const CallNode& node = *item.node;
    int depth = item.depth;
    std::string level = depth > kDrawnLevels ? fmt::format("[{}] ", depth) : "";
    out += fmt::format("{:>7.1f}%  {:>9.3f}  {:>9.3f}  {}{:>10}  {}{}{}\n",
                       pct(node.incl_ns, total), seconds(node.incl_ns), seconds(node.excl_ns),
                       gpu_cells(gpu, node.gpu_ns, node.graph_ns), node.calls,
                       item.prefix + item.branch, level, visible(label(node, item.ambiguous)));
    if (o.max_depth && depth >= *o.max_depth) continue;
    Visible v = visible_children(node, total, o);
    // The root's children start at the margin; below that, each level indents by three columns.
    std::string child_prefix = depth == 0 || depth >= kDrawnLevels
                                   ? item.prefix
                                   : item.prefix + (item.branch == "├─ " ? "│  " : "   ");
    if (v.folded > 0)
      todo.push_back({nullptr, 0, "", "",
                      fmt::format("{:>7.1f}%  {:>9.3f}  {:>9.3f}  {}{:>10}  {}└─ ({} more below "
                                  "{} %)\n",
                                  pct(v.folded_incl_ns, total), seconds(v.folded_incl_ns),
                                  seconds(v.folded_excl_ns),
                                  gpu_cells(gpu, v.folded_gpu_ns, v.folded_graph_ns),
                                  v.folded_calls, child_prefix, v.folded, o.min_pct),
                      false});
    auto twice = shared_names(v.shown);
    for (std::size_t i = v.shown.size(); i-- > 0;) {
      bool last = i + 1 == v.shown.size() && v.folded == 0;
      const CallNode& c = *v.shown[i];
      todo.push_back({&c, depth + 1, child_prefix,
                      depth >= kDrawnLevels ? item.branch
                      : last                ? "└─ "
                                            : "├─ ",
                      "", twice.count({c.name, c.kind}) != 0});
    }
  }
}

// A node and the children it shows as JSON text, written as it goes: the tree is never built
// as a document (a 150k-node tree's took 66 MB of nlohmann objects beside the trees it came
// from, the peak of view --html). Each node's own members are one small object, dumped; its
// "children" come last. Below kJsonTreeLevels a frame's children are one `cut` summary: a JSON
// tree nests two levels a frame, and an 11,460-deep recursion's (SONDE_MAX_DEPTH=65536)
// overflowed the stack of the writer (SIGSEGV in tree and view --html); readers stop too
// (Python's json at about 1,000 levels).
void write_node(std::string& out, const CallNode& node, std::int64_t total, int depth,
                const TreeOptions& o, GpuColumns gpu, const NodeFields* more) {
  Json j{{"name", node.name.str()},
         {"routine_id", node.routine_id},  // what tells two routines of one name apart
         {"kind", node.kind.str()},
         {"where", node.where.str()},
         {"calls", node.calls},
         {"subrs", node.subrs},
         {"incl_s", seconds(node.incl_ns)},
         {"excl_s", seconds(node.excl_ns)},
         {"incl_pct", pct(node.incl_ns, total)}};
  if (node.flops > 0) j["flops"] = node.flops;
  if (gpu.gpu) j["gpu_s"] = seconds(node.gpu_ns);
  if (gpu.graph) j["graph_s"] = seconds(node.graph_ns);
  if (more != nullptr) (*more)(node, j);
  Visible v;
  if (depth >= kJsonTreeLevels && !node.children.empty() &&
      (!o.max_depth || depth < *o.max_depth)) {
    std::int64_t incl = 0, calls = 0;
    for (const CallNode& c : node.children) incl += c.incl_ns, calls += c.calls;
    j["cut"] = Json{{"count", node.children.size()}, {"incl_s", seconds(incl)}, {"calls", calls}};
  } else if (!o.max_depth || depth < *o.max_depth) {
    // Sorted here, the children shown only: the trees are not copied to be sorted whole (the
    // shown ones of a stable sort are the stable sort of the shown ones).
    v = visible_children(node, total, o);
    std::stable_sort(v.shown.begin(), v.shown.end(),
                     [](const CallNode* a, const CallNode* b) { return inclusive_first(*a, *b); });
    if (v.folded > 0)
      j["folded"] = Json{{"count", v.folded},
                         {"incl_s", seconds(v.folded_incl_ns)},
                         {"excl_s", seconds(v.folded_excl_ns)},
                         {"calls", v.folded_calls}};
  }
  out += dump_json(j, -1);
  out.back() = ',';  // the object's closing brace: "children" comes last
  out += "\"children\":[";
  for (std::size_t i = 0; i < v.shown.size(); ++i) {
    if (i > 0) out += ',';
    write_node(out, *v.shown[i], total, depth + 1, o, gpu, more);
  }
  out += "]}";
}

// Appends `head` (an object) left open, and then each further member's name: the member's value
// is written after it, and the object closed with '}'.
void open_object(std::string& out, const Json& head) {
  out += dump_json(head, -1);
  out.pop_back();
}
void member(std::string& out, std::string_view name) {
  if (out.back() != '{') out += ',';
  out += dump_json(Json(std::string(name)), -1);
  out += ':';
}

// Each row as it comes, to `put`: a 20,000-deep chain's paths add up to a gigabyte, which
// `sonde tree --format csv` writes out without holding (it ran out of 2 GiB holding them).
void table_rows(const std::function<void(std::vector<Cell>&&)>& put, const CallNode& root,
                std::int64_t total, const TreeOptions& o, std::int64_t pid, std::int64_t seq,
                GpuColumns gpu) {
  // A row still to add: a node with its path, or the folded row its parent left after its shown
  // children. On a stack, not the call stack (a 65,536-deep path).
  struct Item {
    const CallNode* node;  // nullptr: the folded row of `folded`
    int depth;
    std::string path;
    Visible folded;
  };
  auto row = [&](int depth, const std::string& p, const std::string& name, const std::string& kind,
                 const std::string& where, std::int64_t calls, std::int64_t incl, std::int64_t excl,
                 std::int64_t gpu_ns, std::int64_t graph_ns) {
    put({pid, seq, depth, p, name, kind, where, calls, seconds(incl), seconds(excl),
         pct(incl, total), gpu.gpu ? Cell(seconds(gpu_ns)) : Cell(),
         gpu.graph ? Cell(seconds(graph_ns)) : Cell()});
  };
  std::vector<Item> todo;
  todo.push_back({&root, 0, "", {}});
  while (!todo.empty()) {
    Item item = std::move(todo.back());
    todo.pop_back();
    if (item.node == nullptr) {
      const Visible& v = item.folded;
      row(item.depth, item.path, fmt::format("({} more below {} %)", v.folded, o.min_pct), "folded",
          "", v.folded_calls, v.folded_incl_ns, v.folded_excl_ns, v.folded_gpu_ns,
          v.folded_graph_ns);
      continue;
    }
    const CallNode& node = *item.node;
    row(item.depth, item.path, node.name, node.kind, node.where, node.calls, node.incl_ns,
        node.excl_ns, node.gpu_ns, node.graph_ns);
    if (o.max_depth && item.depth >= *o.max_depth) continue;
    Visible v = visible_children(node, total, o);
    if (v.folded > 0) todo.push_back({nullptr, item.depth + 1, item.path, v});
    for (std::size_t i = v.shown.size(); i-- > 0;) {
      const CallNode* c = v.shown[i];
      todo.push_back({c,
                      item.depth + 1,
                      item.path.empty() ? c->name.str() : item.path + ";" + c->name.str(),
                      {}});
    }
  }
}

std::string thread_header(const ThreadTree& t) {
  std::string name = t.thread_name.empty() ? "" : fmt::format(" \"{}\"", visible(t.thread_name));
  std::string kind;
  if (t.waiting) kind = "; it waits for work most of it: the run's total counts its calls alone";
  if (t.waited_ns > 0)
    kind += fmt::format(
        "; {:.3f} s of it waits for work (threading, selectors, socket, thread and process joins): "
        "not in the run's total",
        seconds(t.waited_ns));
  return fmt::format("process {}, thread {} (tid {}){}: {:.3f} s = 100 % (this thread's time{})\n",
                     t.pid, t.seq, t.tid, name, seconds(t.root.incl_ns), kind);
}

std::string idle_line(const Forest& f) {
  if (f.idle.empty()) return "";
  std::string list;
  for (const ThreadTree& t : f.idle)
    list +=
        fmt::format("{}thread {} (pid {}, tid {})", list.empty() ? "" : ", ", t.seq, t.pid, t.tid);
  return fmt::format("idle threads (no measured call; in no percentage): {}\n", list);
}

Json idle_json(const Forest& f) {
  Json idle = Json::array();
  for (const ThreadTree& t : f.idle)
    idle.push_back(Json{{"pid", t.pid},
                        {"seq", t.seq},
                        {"tid", t.tid},
                        {"name", t.thread_name},
                        {"wall_s", seconds(t.wall_ns)}});
  return idle;
}

GpuColumns merged_columns(const CallNode& merged) {
  return {merged.gpu_ns > 0, merged.graph_ns > 0};
}
GpuColumns forest_columns(const Forest& f) {
  return {has_gpu_time(f.busy), has_graph_time(f.busy)};
}

// tree_table's columns: one layout for every tree's CSV.
void tree_columns(Table& t) {
  t.columns = {{"pid", "pid", 0},        {"thread", "thread", 0},   {"depth", "depth", 0},
               {"path", "path", 0},      {"name", "name", 0},       {"kind", "kind", 0},
               {"where", "where", 0},    {"calls", "calls", 0},     {"incl s", "incl_s", 3},
               {"excl s", "excl_s", 3},  {"incl %", "incl_pct", 1}, {"gpu s", "gpu_s", 3},
               {"graph s", "graph_s", 3}};
}

}  // namespace

std::string render_node_text(const CallNode& root, std::int64_t total, const TreeOptions& o) {
  std::string out(kColumns);
  text_tree(out, root, total, o, {});
  return out;
}

Json render_node_json(const CallNode& root, std::int64_t total, const TreeOptions& o,
                      const NodeFields& more) {
  std::string text;
  write_node(text, root, total, 0, o, {}, more ? &more : nullptr);
  return Json::parse(text);
}

Table node_table(const CallNode& root, std::int64_t total, const TreeOptions& o) {
  Table t;
  tree_columns(t);
  table_rows([&](std::vector<Cell>&& row) { t.rows.push_back(std::move(row)); }, root, total, o, 0,
             0, {});
  for (auto& row : t.rows) row[0] = row[1] = Cell();
  return t;
}

std::string render_tree_text(const Forest& f, const TreeOptions& o) {
  std::string out;
  if (f.merged) {
    CallNode merged = f.merged_root;
    GpuColumns gpu = merged_columns(merged);
    sort_by_inclusive(merged);
    out += fmt::format("{} thread{} merged: {:.3f} s = 100 % (the busy threads' time)\n",
                       merged.calls, merged.calls == 1 ? "" : "s", seconds(merged.incl_ns));
    out += columns_line(gpu);
    text_tree(out, merged, merged.incl_ns, o, gpu);
    if (gpu.graph) out += kGraphLegend;
    std::string idle = idle_line(f);
    return idle.empty() ? out : out + "\n" + idle;
  }
  GpuColumns gpu = forest_columns(f);
  std::string_view columns = columns_line(gpu);
  for (const ThreadTree& t : f.busy) {
    CallNode root = t.root;
    sort_by_inclusive(root);
    if (!out.empty()) out += "\n";
    out += thread_header(t);
    out += columns;
    text_tree(out, root, root.incl_ns, o, gpu);
  }
  if (out.empty())
    out = "no thread called a measured routine\n";
  else if (gpu.graph)
    out += kGraphLegend;
  std::string idle = idle_line(f);
  return idle.empty() ? out : out + "\n" + idle;
}

static void tree_rows(const Forest& f, const TreeOptions& o,
                      const std::function<void(std::vector<Cell>&&)>& put) {
  if (f.merged) {
    CallNode merged = f.merged_root;
    sort_by_inclusive(merged);
    // The root is the busy threads together: no one thread (NULL), its time the denominator.
    table_rows(
        [&](std::vector<Cell>&& row) {
          row[0] = row[1] = Cell();
          put(std::move(row));
        },
        merged, merged.incl_ns, o, 0, 0, merged_columns(merged));
    return;
  }
  GpuColumns gpu = forest_columns(f);
  for (const ThreadTree& tree : f.busy) {
    CallNode root = tree.root;
    sort_by_inclusive(root);
    table_rows(put, root, root.incl_ns, o, tree.pid, tree.seq, gpu);
  }
}

Table tree_table(const Forest& f, const TreeOptions& o) {
  Table t;
  tree_columns(t);
  tree_rows(f, o, [&](std::vector<Cell>&& row) { t.rows.push_back(std::move(row)); });
  return t;
}

void write_tree_csv(const Forest& f, const TreeOptions& o, std::ostream& out) {
  Table header;
  tree_columns(header);
  out << csv_header(header);
  tree_rows(f, o, [&](std::vector<Cell>&& row) { out << csv_row(row); });
}

std::string render_tree_json_text(const Forest& f, const TreeOptions& o) {
  Json head{{"min_pct", o.min_pct},
            {"max_depth", o.max_depth ? Json(*o.max_depth) : Json(nullptr)},
            {"threads", f.merged ? "merge" : "each"}};
  std::string out;  // one text, written once: no tree is copied into another
  if (f.merged) {
    const CallNode& merged = f.merged_root;
    head["denominator"] = "busy threads' time";
    open_object(out, head);
    member(out, "tree");
    write_node(out, merged, merged.incl_ns, 0, o, merged_columns(merged), nullptr);
  } else {
    GpuColumns gpu = forest_columns(f);
    head["denominator"] = "each thread's time";
    open_object(out, head);
    member(out, "trees");
    out += '[';
    for (std::size_t i = 0; i < f.busy.size(); ++i) {
      const ThreadTree& t = f.busy[i];
      if (i > 0) out += ',';
      open_object(out, Json{{"pid", t.pid},
                            {"seq", t.seq},
                            {"tid", t.tid},
                            {"name", t.thread_name},
                            {"wall_s", seconds(t.wall_ns)},
                            {"waiting", t.waiting},
                            {"waited_s", seconds(t.waited_ns)}});
      member(out, "tree");
      write_node(out, t.root, t.root.incl_ns, 0, o, gpu, nullptr);
      out += '}';
    }
    out += ']';
  }
  member(out, "idle_threads");
  out += dump_json(idle_json(f), -1);
  out += '}';
  return out;
}

Json render_tree_json(const Forest& f, const TreeOptions& o) {
  return Json::parse(render_tree_json_text(f, o));
}

}  // namespace sonde::analyzers
