#include "advice/op_loops.hpp"

#include <algorithm>
#include <cctype>
#include <map>
#include <set>
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
// A venv's site-packages path (lib/python3.12/site-packages/torch/) is no standard library's,
// though in_stdlib's "/python3.N/" test reads it so: the file's part alone decides.
bool torch_frame(const CallNode& n) {
  return n.kind == kinds::kPython && n.file.str().find("/torch/") != std::string::npos;
}

// A BLAS call made straight from a Python frame: numpy's `@` and np.matmul call the BLAS from C,
// with no frame of numpy's between (a red team's loop of 3x3 products `R[i] @ P[i]`, 300,000 of
// them, 80 % of its run, read "no rule fired"; one stacked matmul took it from 0.329 to 0.016 s).
// Beneath a torch operator or numpy's Python the BLAS is that call's, never a small call itself;
// beneath a helper of the program's own it is not counted either (a per-element helper of one
// `@` is not seen): on the bench's 1 M-node file that alone held 11 MB more of `sonde view
// --html`'s peak, over its 250 MiB.
bool blas_call(const CallNode& n) { return n.kind == kinds::kBlas; }

// A call into the array library itself: what a loop over elements makes by the thousand.
bool library_op(const CallNode& n) { return aten_op(n) || numpy_frame(n) || torch_frame(n); }

// What a node's subtree holds (itself left out), for the small calls of the loops above it.
struct Beneath {
  bool numpy = false, torch = false;  // the array libraries called
  bool blas = false;  // BLAS products called from Python (numpy's `@`): a direct child's only
  bool step = false;  // a training step's backward or optimizer step (Walk::is_step)
  // The outermost calls into the array libraries: calls and time.
  std::int64_t lib_calls = 0, lib_ns = 0;
  bool any() const { return numpy || torch; }
};

// Whether a frame is a training step's backward or optimizer step. An `update` of the
// program's own known by its name alone is none: an AverageMeter.update in a loop exempted it
// (a red-team find); a backward by name is (Chainer's, numpy's hand-written).
bool step_role(const CallNode& c) {
  Role r = role_of(c, {});
  return r.phase == kBackward || (r.phase == kUpdate && !r.by_name);
}

// Bottom-up with a stack of its own: asked of each small helper, a walk of its subtree each
// time was quadratic in a deep tree of helpers. Roles once per routine. Kept only for the nodes
// add_node asks of, the program's own frames and their children: one entry per node of a
// 1M-node file was the largest cost of `sonde view --html` there (8 % of its time in the map's
// inserts, more in their allocations).
std::unordered_map<const CallNode*, Beneath> beneath_all(
    const CallNode& root, std::unordered_map<std::int64_t, bool>& steps) {
  auto is_step = [&steps](const CallNode& c) {
    if (c.routine_id == 0) return step_role(c);
    auto [it, added] = steps.try_emplace(c.routine_id, false);
    if (added) it->second = step_role(c);
    return it->second;
  };
  struct Open {
    const CallNode* node;
    std::size_t next = 0;
    Beneath below;      // what its children's subtrees hold so far
    bool user = false;  // the program's own frame: add_node asks of it and of its children
    bool keep = false;
  };
  std::unordered_map<const CallNode*, Beneath> out;
  std::vector<Open> open;
  open.push_back({&root, 0, {}, false, false});
  while (!open.empty()) {
    if (Open& top = open.back(); top.next < top.node->children.size()) {
      const CallNode& c = top.node->children[top.next++];
      bool user = is_user_frame(c);
      bool keep = user || top.user;
      open.push_back({&c, 0, {}, user, keep});
      continue;
    }
    Open done = open.back();
    open.pop_back();
    if (done.keep) out[done.node] = done.below;
    if (open.empty()) break;
    const CallNode& c = *done.node;
    const Beneath& below = done.below;
    Beneath& b = open.back().below;
    b.numpy = b.numpy || below.numpy || numpy_frame(c);
    b.torch = b.torch || below.torch || aten_op(c) || torch_frame(c);
    b.step = b.step || below.step || is_step(c);
    if (library_op(c)) {
      b.lib_calls += c.calls;
      b.lib_ns += c.incl_ns;
    } else {
      b.lib_calls += below.lib_calls;
      b.lib_ns += below.lib_ns;
    }
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

// A site's small calls of one name, apart: a training loop's inner loops are chosen from them.
struct ChildSum {
  std::int64_t calls = 0, dispatched = 0, ns = 0, module_calls = 0;
  bool numpy = false, torch = false, blas = false;
  std::set<std::string> operators;
  std::map<std::string, std::int64_t> aten_calls;
};

// What one node of a site holds: its small calls, per name.
struct SiteSum {
  OpLoop loop;
  std::map<std::string, std::int64_t> by_name;
  std::map<std::string, ChildSum> children;
  std::int64_t step_calls = 0;  // the steps its step children took, over its nodes
  std::int64_t largest_incl = -1;
};

// A helper of the program's own called per element: its time is small calls into the array
// libraries (each under kLoopCallNs on average), at most this long a call. A per-row helper of
// 7 numpy calls took 21 us or more a call and no loop was found (a red-team find).
constexpr std::int64_t kHelperNs = 10 * kLoopCallNs;

// numpy's matmul over a stack of matrices calls the BLAS once per matrix from C, no interpreter
// between: one call of the program's, no loop. A product per iteration of a Python loop costs
// the loop's own time besides (the red team's `R[i] @ P[i]`: 2.2 us of its own a product under
// sonde; `R @ P[..., None]` over the same stack: 0.06 us). BLAS calls are small calls only where
// the function spends at least this of its own per call.
constexpr std::int64_t kInterpreterNs = 500;

// Recurrent cells stepped from Python, and nn.Module calls: loops whose steps depend on each
// other (a recurrence), or a stack of small layers, which no rewrite over whole tensors removes.
bool recurrent_cell(std::string_view op) {
  return op == "aten::lstm_cell" || op == "aten::gru_cell" || op == "aten::rnn_tanh_cell" ||
         op == "aten::rnn_relu_cell";
}
bool module_call(const CallNode& c) {
  return c.kind == kinds::kPython && c.file.ends_with("torch/nn/modules/module.py");
}

// The outermost ATen operators beneath a small call, a few levels at most (what the
// torch-operator candidates it explains are named).
void operators_beneath(const CallNode& c, std::set<std::string>& out) {
  constexpr std::size_t kLook = 64;
  std::vector<const CallNode*> todo{&c};
  for (std::size_t seen = 0; !todo.empty() && seen < kLook; ++seen) {
    const CallNode* n = todo.back();
    todo.pop_back();
    if (aten_op(*n)) {
      out.insert(n->name.str());
      continue;
    }
    for (const CallNode& k : n->children) todo.push_back(&k);
  }
}

struct Walk {
  // kLoopCallNs and kHelperNs, stretched as the run's calls were (op_loops' `stretch`).
  std::int64_t loop_call_ns = kLoopCallNs, helper_ns = kHelperNs, interpreter_ns = kInterpreterNs;
  std::unordered_map<const CallNode*, Beneath> beneath;  // beneath_all's: of user frames, kids
  std::unordered_map<std::int64_t, bool> steps;          // per routine
  // Per routine: an entry a training step makes once (its backward, its optimizer's step; not
  // zero_grad or clip_grad_norm_, which are update time too): its calls count the steps.
  std::unordered_map<std::int64_t, bool> entries;
  bool entry(const CallNode& c) {
    auto [it, added] = entries.try_emplace(c.routine_id, false);
    if (added) {
      Role r = role_of(c, {});
      it->second = r.counts && (r.phase == kBackward || (r.phase == kUpdate && !r.by_name));
    }
    return it->second;
  }
};

// p's own time and small calls, counted for the site whose node is `site` (p itself, or the
// function a comprehension p runs in).
void add_node(const CallNode& p, const CallNode& site, const CallNode* parent, SiteSum& s,
              Walk& w) {
  OpLoop& l = s.loop;
  if (&p == &site) l.site_calls += p.calls;
  l.own_ns += p.excl_ns;
  if (&p == &site && parent && p.incl_ns > s.largest_incl) {
    s.largest_incl = p.incl_ns;
    l.caller = parent->name.str();
  }
  // The training loop itself: a backward or optimizer step among its calls, or beneath a
  // helper it calls (an apply_grads() running backward and the step: a red-team find).
  l.step = l.step || w.beneath[&p].step;
  std::int64_t steps = 0, blas_calls = 0;
  for (const CallNode& c : p.children)
    if (blas_call(c)) blas_calls += c.calls;
  bool blas_looped = blas_calls > 0 && p.excl_ns >= blas_calls * w.interpreter_ns;
  for (const CallNode& c : p.children) {
    if (c.calls == 0 || (comprehension(c) && &p == &site)) continue;
    const Beneath& below = w.beneath[&c];
    // A helper running the step (apply_grads) counts the steps by its calls, as an entry does.
    bool helper_step = below.step && c.kind == kinds::kPython && is_user_frame(c);
    if (helper_step || w.entry(c)) steps = std::max(steps, c.calls);
    bool helper = c.kind == kinds::kPython && is_user_frame(c);
    Beneath lib;
    if (helper) {
      // Small itself, or a few small library calls a call; no step beneath it.
      bool small_calls = below.lib_calls >= c.calls && below.lib_calls > 0 &&
                         below.lib_ns / below.lib_calls <= w.loop_call_ns;
      if (below.step || mean_ns(c) > (small_calls ? w.helper_ns : w.loop_call_ns)) continue;
      lib = below;
    } else {
      if (mean_ns(c) > w.loop_call_ns || (blas_call(c) && !blas_looped)) continue;
      lib.torch = aten_op(c) || torch_frame(c);
      lib.numpy = numpy_frame(c) || blas_call(c);
      lib.blas = blas_call(c);
    }
    if (!lib.any()) continue;
    // A helper's calls into the libraries are the calls whose dispatch the loop pays.
    l.small_calls += helper ? std::max(c.calls, below.lib_calls) : c.calls;
    l.small_ns += c.incl_ns;
    if (site.calls > 0)
      l.max_per_call = std::max(l.max_per_call, static_cast<double>(c.calls) / site.calls);
    s.by_name[c.name.str()] += c.calls;
    if (aten_op(c)) l.aten_calls[c.name.str()] += c.calls;
    if (module_call(c)) l.module_calls += c.calls;
    if (!lib.blas) operators_beneath(c, l.operators);  // a BLAS call has no operator beneath
    l.numpy = l.numpy || lib.numpy;
    l.torch = l.torch || lib.torch;
    l.blas = l.blas || lib.blas;
    ChildSum& k = s.children[c.name.str()];
    k.calls += c.calls;
    k.dispatched += helper ? std::max(c.calls, below.lib_calls) : c.calls;
    k.ns += c.incl_ns;
    if (aten_op(c)) k.aten_calls[c.name.str()] += c.calls;
    if (module_call(c)) k.module_calls += c.calls;
    if (!lib.blas) operators_beneath(c, k.operators);
    k.numpy = k.numpy || lib.numpy;
    k.blas = k.blas || lib.blas;
    k.torch = k.torch || lib.torch;
  }
  s.step_calls += steps;
  for (const std::string& op : l.operators)
    if (recurrent_cell(op)) l.recurrent = true;
}

// A training loop's site keeps only the small calls it makes many times a step: the loop inside
// its loop, judged as any other; its own time, the outer loop's interpretation with the inner
// one's, is left out. None such: it stays the training loop, no candidate.
void inner_loop_only(SiteSum& s) {
  OpLoop in;
  in.site = s.loop.site;
  in.routine_id = s.loop.routine_id;
  in.caller = s.loop.caller;
  in.site_calls = s.loop.site_calls;
  in.steps = s.step_calls;
  std::map<std::string, std::int64_t> by_name;
  for (const auto& [name, k] : s.children) {
    double per_step = double(k.calls) / double(s.step_calls);
    if (per_step < kMinPerCall) continue;
    in.small_calls += k.dispatched;
    in.small_ns += k.ns;
    in.max_per_call = std::max(in.max_per_call, per_step);
    in.module_calls += k.module_calls;
    in.numpy = in.numpy || k.numpy;
    in.blas = in.blas || k.blas;
    in.torch = in.torch || k.torch;
    in.operators.insert(k.operators.begin(), k.operators.end());
    for (const auto& [op, calls] : k.aten_calls) in.aten_calls[op] += calls;
    by_name[name] = k.calls;
  }
  if (in.small_calls == 0) return;
  for (const std::string& op : in.operators)
    if (recurrent_cell(op)) in.recurrent = true;
  s.loop = std::move(in);
  s.by_name = std::move(by_name);
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

std::vector<OpLoop> op_loops(const std::vector<ThreadTree>& threads, double stretch) {
  std::unordered_map<std::int64_t, SiteSum> sites;
  // Outermost ATen operators' calls by operator (in-place forms with theirs), and the small
  // autograd nodes by the forward operator they are the backward of.
  std::unordered_map<std::string, std::int64_t> op_calls;
  struct Backward {
    std::int64_t calls = 0, ns = 0;
  };
  std::unordered_map<std::string, Backward> backward;
  Walk w;
  w.loop_call_ns = std::llround(static_cast<double>(kLoopCallNs) * std::max(1.0, stretch));
  w.helper_ns = 10 * w.loop_call_ns;
  w.interpreter_ns = std::llround(static_cast<double>(kInterpreterNs) * std::max(1.0, stretch));
  for (const ThreadTree& t : threads) {
    w.beneath = beneath_all(t.root, w.steps);
    std::vector<std::pair<const CallNode*, const CallNode*>> todo{{&t.root, nullptr}};
    while (!todo.empty()) {
      auto [node, parent] = todo.back();
      todo.pop_back();
      if (aten_op(*node) && !(parent && parent->kind == kinds::kTorch))
        op_calls[without_trailing_underscore(node->name.str())] += node->calls;
      if (node->kind == kinds::kTorch && node->name.starts_with(kEvaluate) &&
          mean_ns(*node) <= w.loop_call_ns) {
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
    if (s.loop.step && s.step_calls > 0) inner_loop_only(s);
    if (s.loop.small_calls == 0) continue;
    std::vector<std::pair<std::string, std::int64_t>> names(s.by_name.begin(), s.by_name.end());
    std::sort(names.begin(), names.end(),
              [](const auto& a, const auto& b) { return a.second > b.second; });
    if (names.size() > 3) names.resize(3);
    s.loop.top = std::move(names);
    s.loop.small_bound_ns = w.loop_call_ns;
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
        s.caller_file = parent->file.str();
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
