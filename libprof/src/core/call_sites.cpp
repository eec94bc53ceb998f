#include "core/call_sites.hpp"

#include <string_view>

#include "sonde/routine_kinds.hpp"
#include "symbols/symbolize.hpp"

namespace sonde {

namespace {
// torch.profiler's (and sonde's) name of the autograd engine evaluating one node.
constexpr std::string_view kAutogradNode = "autograd::engine::evaluate_function: ";
// numpy 1.2x's dispatchers around each public function (np.dot, np.tensordot), code compiled
// from a string: every np.dot of a program had the one call site
// <__array_function__ internals>:177(dot), whichever function of its own made it (a red-team
// find). The frame above it is the call site.
constexpr std::string_view kNumpyDispatcher = "<__array_function__ internals>";
}  // namespace

void CallSites::name(ThreadSnapshot& t, RoutineRegistry& registry) {
  if (t.shapes.empty()) return;
  // Every routine a node of the snapshot names was interned before the node was made.
  std::vector<const Routine*> added = registry.since(routines_.size());
  routines_.insert(routines_.end(), added.begin(), added.end());
  // A shape names a node the snapshot copied (shapes are read first), but a bad index must
  // leave the site unnamed, never read past the copy.
  const uint32_t n = uint32_t(t.nodes.size());
  for (ShapeRow& s : t.shapes) {
    s.call_site = "";
    if (s.node >= n) continue;
    // The nearest Python frame, or, nearer, the autograd node whose backward made the call:
    // above a backward GEMM the nearest Python frame is autograd's own backward()
    // (__init__.py:103(backward)), which says nothing of which layer's gradient it is, and in
    // PyTorch's autograd device thread there is none at all.
    std::string_view site;
    for (uint32_t a = t.nodes[s.node].parent; a != 0 && a < n && site.empty();
         a = t.nodes[a].parent) {
      RoutineId r = t.nodes[a].routine;
      if (r >= routines_.size()) continue;
      const Routine& routine = *routines_[r];
      if (routine.kind == kinds::kPython) {
        if (routine.file != kNumpyDispatcher) site = routine.name;
      } else if (routine.kind == kinds::kTorch && routine.name.starts_with(kAutogradNode)) {
        site = std::string_view(routine.name).substr(kAutogradNode.size());
      }
    }
    s.call_site = !site.empty() ? site : native(s.site);
  }
}

std::string_view CallSites::native(const void* site) {
  auto it = native_.find(site);
  if (it == native_.end()) it = native_.emplace(site, symbolize(site)).first;
  return it->second;
}

}  // namespace sonde
