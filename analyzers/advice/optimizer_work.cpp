#include "advice/optimizer_work.hpp"

#include <unordered_map>
#include <utility>

#include "advice/candidates.hpp"

namespace sonde::analyzers {
namespace {

bool library_call(const CallNode& n) { return n.kind == "blas" || n.kind == "onednn"; }
bool phase(const CallNode& n) { return n.kind == "region" || n.kind == "python"; }

struct Below {
  bool optimizer = false;   // an optimizer-like phase in the subtree, itself included
  std::int64_t blas_ns = 0;  // its outermost library calls' time
};

// Bottom-up, with a stack of its own (a 65,536-deep path).
std::unordered_map<const CallNode*, Below> subtree_facts(const CallNode& root) {
  std::unordered_map<const CallNode*, Below> out;
  std::vector<std::pair<const CallNode*, bool>> todo{{&root, false}};
  while (!todo.empty()) {
    auto [node, children_done] = todo.back();
    todo.pop_back();
    if (!children_done) {
      todo.emplace_back(node, true);
      for (const auto& c : node->children) todo.emplace_back(&c, false);
      continue;
    }
    Below b{optimizer_phase(*node), 0};
    for (const auto& c : node->children) {
      const Below& cb = out[&c];
      b.optimizer = b.optimizer || cb.optimizer;
      b.blas_ns += cb.blas_ns;
    }
    if (library_call(*node)) b.blas_ns = node->incl_ns;  // the calls beneath are inside it
    out[node] = b;
  }
  return out;
}

void walk(const CallNode& root, std::map<std::string, OptimizerWork>& work) {
  auto below = subtree_facts(root);
  struct Item {
    const CallNode* node;
    const CallNode* enclosing;  // the nearest optimizer-like phase above (one name: the outer)
    bool counted;               // inside a subtree already counted as other work
  };
  std::vector<Item> todo{{&root, nullptr, false}};
  while (!todo.empty()) {
    auto [node, enclosing, counted] = todo.back();
    todo.pop_back();
    const CallNode* next = enclosing;
    if (optimizer_phase(*node)) {
      if (enclosing && enclosing->name != node->name) work[enclosing->name].inner_ns += node->incl_ns;
      if (!enclosing || enclosing->name != node->name) next = node;
    } else if (enclosing && !counted && phase(*node) && !below[node].optimizer) {
      OptimizerWork& w = work[enclosing->name];
      w.other_ns += node->incl_ns;
      w.other_blas_ns += below[node].blas_ns;
      counted = true;
    }
    for (const auto& child : node->children) todo.push_back({&child, next, counted});
  }
}

}  // namespace

bool optimizer_phase(const CallNode& n) { return phase(n) && looks_like_optimizer(n.name); }

std::map<std::string, OptimizerWork> optimizer_work(const std::vector<ThreadTree>& threads) {
  std::map<std::string, OptimizerWork> work;
  for (const ThreadTree& t : threads) walk(t.root, work);
  return work;
}

}  // namespace sonde::analyzers
