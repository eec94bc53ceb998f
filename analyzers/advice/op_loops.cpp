#include "advice/op_loops.hpp"

#include <algorithm>
#include <cctype>
#include <map>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "metrics/breakdown_roles.hpp"
#include "sonde/routine_kinds.hpp"

namespace sonde::analyzers {
namespace {

constexpr std::string_view kEvaluate = "autograd::engine::evaluate_function: ";

bool aten_op(const CallNode& n) { return n.kind == kinds::kTorch && n.name.starts_with("aten::"); }

// numpy's Python layer: its packages' files, and numpy 1.2x's dispatchers, whose code object
// is compiled from a string ("<__array_function__ internals>", a file of no package).
bool numpy_frame(const CallNode& n) {
  const std::string& f = n.file.str();
  return n.kind == kinds::kPython &&
         (f.find("/numpy/") != std::string::npos || f == "<__array_function__ internals>");
}
bool torch_frame(const CallNode& n) {
  return n.kind == kinds::kPython && n.file.str().find("/torch/") != std::string::npos &&
         !in_stdlib(n.file);
}

// A call into the array library itself: what a loop over elements makes by the thousand.
bool library_op(const CallNode& n) { return aten_op(n) || numpy_frame(n) || torch_frame(n); }

// The array libraries called beneath a node (itself left out).
struct Libraries {
  bool numpy = false, torch = false;
  bool any() const { return numpy || torch; }
};

// Libraries beneath every node of a tree, bottom-up with a stack of its own: asked of each
// small helper, a walk of its subtree each time was quadratic in a deep tree of helpers.
std::unordered_map<const CallNode*, Libraries> libraries_beneath(const CallNode& root) {
  std::unordered_map<const CallNode*, Libraries> out;
  std::vector<std::pair<const CallNode*, bool>> todo{{&root, false}};
  while (!todo.empty()) {
    auto [node, children_done] = todo.back();
    todo.pop_back();
    if (!children_done) {
      todo.emplace_back(node, true);
      for (const CallNode& c : node->children) todo.emplace_back(&c, false);
      continue;
    }
    Libraries l;
    for (const CallNode& c : node->children) {
      const Libraries& below = out[&c];
      l.numpy = l.numpy || below.numpy || numpy_frame(c);
      l.torch = l.torch || below.torch || aten_op(c) || torch_frame(c);
    }
    out[node] = l;
  }
  return out;
}

// A comprehension's frame (3.11 and before; 3.12 inlines them, PEP 709): its loop is its
// function's, and is told as that function's.
bool comprehension(const CallNode& n) {
  return n.name.ends_with("(<listcomp>)") || n.name.ends_with("(<genexpr>)") ||
         n.name.ends_with("(<dictcomp>)") || n.name.ends_with("(<setcomp>)");
}

std::int64_t mean_ns(const CallNode& n) { return n.calls > 0 ? n.incl_ns / n.calls : 0; }

// What one node of a site holds: its small calls, per name.
struct SiteSum {
  OpLoop loop;
  std::map<std::string, std::int64_t> by_name;
  std::int64_t largest_incl = -1;
};

// p's own time and small calls, counted for the site whose node is `site` (p itself, or the
// function a comprehension p runs in); per_call is the site node's calls.
struct Walk {
  std::unordered_map<const CallNode*, Libraries> beneath;
  // Whether a routine's frame is a training step's backward or optimizer step (role_of, once
  // per routine: its tests read the name's parts).
  std::unordered_map<std::int64_t, bool> step;
  bool is_step(const CallNode& c) {
    auto [it, added] = step.try_emplace(c.routine_id, false);
    if (added || c.routine_id == 0) {
      Role r = role_of(c, {});
      it->second = r.phase == kBackward || r.phase == kUpdate;
    }
    return it->second;
  }
};

void add_node(const CallNode& p, const CallNode& site, const CallNode* parent, SiteSum& s,
              Walk& w) {
  OpLoop& l = s.loop;
  if (&p == &site) l.site_calls += p.calls;
  l.own_ns += p.excl_ns;
  if (&p == &site && parent && p.incl_ns > s.largest_incl) {
    s.largest_incl = p.incl_ns;
    l.caller = parent->name.str();
  }
  for (const CallNode& c : p.children) {
    if (w.is_step(c)) l.step = true;
    if (c.calls == 0 || mean_ns(c) > kSmallCallNs || (comprehension(c) && &p == &site)) continue;
    Libraries lib;
    if (aten_op(c) || torch_frame(c))
      lib.torch = true;
    else if (numpy_frame(c))
      lib.numpy = true;
    else if (c.kind == kinds::kPython && is_user_frame(c))
      lib = w.beneath[&c];
    if (!lib.any()) continue;
    l.small_calls += c.calls;
    l.small_ns += c.incl_ns;
    if (site.calls > 0)
      l.max_per_call = std::max(l.max_per_call, static_cast<double>(c.calls) / site.calls);
    s.by_name[c.name.str()] += c.calls;
    if (aten_op(c)) l.aten_calls[c.name.str()] += c.calls;
    l.numpy = l.numpy || lib.numpy;
    l.torch = l.torch || lib.torch;
  }
}

std::string without_trailing_underscore(std::string_view op) {
  if (op.starts_with("aten::")) op.remove_prefix(6);
  while (op.ends_with("_")) op.remove_suffix(1);
  return std::string(op);
}

}  // namespace

std::string forward_op_of(std::string_view name) {
  auto at = name.rfind("Backward");
  if (at == std::string_view::npos || at == 0) return "";
  for (char c : name.substr(at + 8))
    if (!std::isdigit(static_cast<unsigned char>(c))) return "";
  std::string out;
  for (std::size_t i = 0; i < at; ++i) {
    auto c = static_cast<unsigned char>(name[i]);
    if (!std::isalnum(c)) return "";
    if (std::isupper(c) && i > 0) out += '_';
    out += static_cast<char>(std::tolower(c));
  }
  return out;
}

std::vector<OpLoop> op_loops(const std::vector<ThreadTree>& threads) {
  std::unordered_map<std::int64_t, SiteSum> sites;
  // Outermost ATen operators' calls by operator (in-place forms with theirs), and the small
  // autograd nodes by the forward operator they are the backward of.
  std::unordered_map<std::string, std::int64_t> op_calls;
  struct Backward {
    std::int64_t calls = 0, ns = 0;
  };
  std::unordered_map<std::string, Backward> backward;
  Walk w;
  for (const ThreadTree& t : threads) {
    w.beneath = libraries_beneath(t.root);
    std::vector<std::pair<const CallNode*, const CallNode*>> todo{{&t.root, nullptr}};
    while (!todo.empty()) {
      auto [node, parent] = todo.back();
      todo.pop_back();
      if (aten_op(*node) && !(parent && parent->kind == kinds::kTorch))
        op_calls[without_trailing_underscore(node->name.str())] += node->calls;
      if (node->kind == kinds::kTorch && node->name.starts_with(kEvaluate) &&
          mean_ns(*node) <= kSmallCallNs) {
        std::string fwd = forward_op_of(std::string_view(node->name).substr(kEvaluate.size()));
        if (!fwd.empty()) {
          backward[fwd].calls += node->calls;
          backward[fwd].ns += node->incl_ns;
        }
      }
      if (node->kind == kinds::kPython && is_user_frame(*node) && node->routine_id != 0) {
        // A comprehension's small calls are its function's, where that is the program's own
        // (3.12's inlined comprehensions read so); a comprehension at a module's top level
        // with no such caller is a site of its own.
        bool folded = comprehension(*node) && parent && parent->kind == kinds::kPython &&
                      is_user_frame(*parent) && parent->routine_id != 0;
        const CallNode& site = folded ? *parent : *node;
        SiteSum& s = sites[site.routine_id];
        s.loop.site = site.name.str();
        s.loop.routine_id = site.routine_id;
        add_node(*node, site, folded ? nullptr : parent, s, w);
      }
      for (const CallNode& c : node->children) todo.emplace_back(&c, node);
    }
  }
  std::vector<OpLoop> out;
  for (auto& [id, s] : sites) {
    if (s.loop.small_calls == 0) continue;
    std::vector<std::pair<std::string, std::int64_t>> names(s.by_name.begin(), s.by_name.end());
    std::sort(names.begin(), names.end(),
              [](const auto& a, const auto& b) { return a.second > b.second; });
    if (names.size() > 3) names.resize(3);
    s.loop.top = std::move(names);
    for (const auto& [op, calls] : s.loop.aten_calls) {
      std::string fwd = without_trailing_underscore(op);
      auto b = backward.find(fwd);
      auto all = op_calls.find(fwd);
      if (b == backward.end() || all == op_calls.end() || all->second <= 0) continue;
      double part = std::min(1.0, static_cast<double>(calls) / all->second);
      s.loop.backward_ns += static_cast<std::int64_t>(part * b->second.ns);
      s.loop.backward_calls += static_cast<std::int64_t>(part * b->second.calls);
    }
    out.push_back(std::move(s.loop));
  }
  std::sort(out.begin(), out.end(),
            [](const OpLoop& a, const OpLoop& b) { return a.small_ns > b.small_ns; });
  return out;
}

std::vector<MatrixVectorSite> matrix_vector_sites(const std::vector<ThreadTree>& threads) {
  std::map<std::pair<std::int64_t, std::int64_t>, MatrixVectorSite> sites;
  for (const ThreadTree& t : threads) {
    std::vector<std::pair<const CallNode*, const CallNode*>> todo{{&t.root, nullptr}};
    while (!todo.empty()) {
      auto [node, parent] = todo.back();
      todo.pop_back();
      if (node->kind == kinds::kBlas && node->name.str().find("gemv") != std::string::npos &&
          parent) {
        MatrixVectorSite& s = sites[{node->routine_id, parent->routine_id}];
        s.routine = node->name.str();
        s.routine_id = node->routine_id;
        s.caller = parent->name.str();
        s.calls += node->calls;
        s.ns += node->incl_ns;
        s.caller_calls += parent->calls;
        s.flops += node->flops;
        continue;  // the BLAS's own calls beneath it are the same product
      }
      for (const CallNode& c : node->children) todo.emplace_back(&c, node);
    }
  }
  std::vector<MatrixVectorSite> out;
  for (auto& [key, s] : sites) out.push_back(std::move(s));
  std::sort(out.begin(), out.end(),
            [](const MatrixVectorSite& a, const MatrixVectorSite& b) { return a.ns > b.ns; });
  return out;
}

}  // namespace sonde::analyzers
