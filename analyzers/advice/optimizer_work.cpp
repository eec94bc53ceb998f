#include "advice/optimizer_work.hpp"

#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "advice/candidates.hpp"
#include "metrics/breakdown_roles.hpp"
#include "profile/line_costs.hpp"
#include "sonde/routine_kinds.hpp"

namespace sonde::analyzers {
namespace {

bool library_call(const CallNode& n) { return n.kind == kinds::kBlas || n.kind == kinds::kOnednn; }
bool phase(const CallNode& n) { return n.kind == kinds::kRegion || n.kind == kinds::kPython; }

struct Below {
  bool optimizer = false;    // an optimizer-like phase in the subtree, itself included
  std::int64_t blas_ns = 0;  // its outermost library calls' time
};

// What torch and the standard library put between that wrapper and the step it calls: the
// record_function range (Optimizer.step#Lion.step), no_grad's decorate_context, functools'.
bool between_wrapper_and_step(const CallNode& n) {
  if (n.kind == kinds::kRegion) return true;
  return n.kind == kinds::kPython &&
         (n.file.str().find("/torch/") != std::string::npos || in_stdlib(n.file));
}

// The steps of the program's own optimizers (a Lion, a LAMB): a Python frame named step,
// outside torch, called from torch.optim's wrapper through the frames above. Their names say
// nothing of an update, and an optimizer-update candidate was never made of them (a Lion's
// per-parameter loop, 22 % of a run, read "no rule fired").
std::unordered_set<std::int64_t> own_optimizer_steps(const std::vector<ThreadTree>& threads) {
  std::unordered_set<std::int64_t> out;
  for (const ThreadTree& t : threads)
    for_each_node(t.root, [&](const CallNode& wrapper, int) {
      if (!torch_step_wrapper(wrapper, true)) return;
      std::vector<const CallNode*> todo;
      for (const CallNode& c : wrapper.children) todo.push_back(&c);
      while (!todo.empty()) {
        const CallNode* n = todo.back();
        todo.pop_back();
        if (n->kind == kinds::kPython && n->file.str().find("/torch/") == std::string::npos &&
            function_part(n->name) == "step") {
          out.insert(n->routine_id);
        } else if (between_wrapper_and_step(*n)) {
          for (const CallNode& c : n->children) todo.push_back(&c);
        }
      }
    });
  return out;
}

// optimizer_phase() once per routine: its name's test lower-cases a copy of it, which on every
// node of a 1M-node tree was most of `sonde candidates`' time.
class OptimizerPhases {
 public:
  explicit OptimizerPhases(std::unordered_set<std::int64_t> steps) : steps_(std::move(steps)) {}
  bool operator()(const CallNode& n) {
    if (n.routine_id == 0) return optimizer_phase(n);  // a node made by hand, not from a file
    auto [it, added] = known_.try_emplace(n.routine_id, false);
    if (added) it->second = own_step(n) || optimizer_phase(n);
    return it->second;
  }
  bool own_step(const CallNode& n) const { return n.routine_id && steps_.count(n.routine_id); }

 private:
  std::unordered_map<std::int64_t, bool> known_;
  std::unordered_set<std::int64_t> steps_;
};

// Bottom-up, with a stack of its own (a 65,536-deep path).
std::unordered_map<const CallNode*, Below> subtree_facts(const CallNode& root,
                                                         OptimizerPhases& optimizer) {
  std::unordered_map<const CallNode*, Below> out;
  for_each_node_bottom_up(root, [&](const CallNode& node) {
    Below b{optimizer(node), 0};
    for (const auto& c : node.children) {
      const Below& cb = out[&c];
      b.optimizer = b.optimizer || cb.optimizer;
      b.blas_ns += cb.blas_ns;
    }
    if (library_call(node)) b.blas_ns = node.incl_ns;  // the calls beneath are inside it
    out[&node] = b;
  });
  return out;
}

// Operators that make a view or an alias of a tensor, no new values: p.detach() in an EMA of
// mul_ and add_ (or a loop over state_dict(), which detaches) is still one in place.
bool view_op(std::string_view name) {
  for (std::string_view v :
       {"aten::detach", "aten::alias", "aten::t", "aten::select", "aten::slice", "aten::expand",
        "aten::as_strided", "aten::view", "aten::reshape", "aten::unsqueeze", "aten::squeeze",
        "aten::flatten", "aten::_reshape_alias", "aten::permute", "aten::transpose"})
    if (name == v) return true;
  return false;
}

void walk(const CallNode& root, std::map<std::string, OptimizerWork>& work,
          OptimizerPhases& optimizer) {
  // Work is only found under an optimizer-like phase: a tree without one (most threads) needs
  // no subtree facts, which are a map entry per node.
  bool any = false;
  for_each_node(root, [&](const CallNode& n, int) { any = any || optimizer(n); });
  if (!any) return;
  auto below = subtree_facts(root, optimizer);
  struct Item {
    const CallNode* node;
    const CallNode* enclosing;  // the nearest optimizer-like phase above (one name: the outer)
    bool counted;               // inside a subtree already counted as other work
    bool under_op;              // beneath a torch operator
  };
  std::vector<Item> todo{{&root, nullptr, false, false}};
  while (!todo.empty()) {
    auto [node, enclosing, counted, under_op] = todo.back();
    todo.pop_back();
    const CallNode* next = enclosing;
    if (enclosing && node->kind == kinds::kTorch && node->name.starts_with("aten::_foreach_"))
      work[enclosing->name].foreach = true;
    if (enclosing && !under_op && node->kind == kinds::kTorch && node->name.starts_with("aten::")) {
      OptimizerWork& w = work[enclosing->name];
      w.op_calls += node->calls;
      if (!node->name.ends_with("_") && !view_op(node->name)) w.out_of_place_calls += node->calls;
    }
    bool op = under_op || node->kind == kinds::kTorch;
    if (optimizer(*node)) {
      if (optimizer.own_step(*node)) work[node->name].torch_step = true;
      if (enclosing && enclosing->name != node->name)
        work[enclosing->name].inner_ns += node->incl_ns;
      if (!enclosing || enclosing->name != node->name) next = node;
    } else if (enclosing && !counted && phase(*node) && !below[node].optimizer) {
      OptimizerWork& w = work[enclosing->name];
      w.other_ns += node->incl_ns;
      w.other_blas_ns += below[node].blas_ns;
      counted = true;
    }
    for (const auto& child : node->children) todo.push_back({&child, next, counted, op});
  }
}

}  // namespace

bool optimizer_phase(const CallNode& n) { return phase(n) && looks_like_optimizer(n.name); }

std::map<std::string, OptimizerWork> optimizer_work(const std::vector<ThreadTree>& threads) {
  std::map<std::string, OptimizerWork> work;
  OptimizerPhases optimizer(own_optimizer_steps(threads));
  for (const ThreadTree& t : threads) walk(t.root, work, optimizer);
  return work;
}

}  // namespace sonde::analyzers
