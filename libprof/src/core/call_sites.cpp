#include "core/call_sites.hpp"

#include "sonde/routine_kinds.hpp"
#include "symbols/symbolize.hpp"

namespace sonde {

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
    const Routine* python = nullptr;
    for (uint32_t a = t.nodes[s.node].parent; a != 0 && a < n && !python; a = t.nodes[a].parent) {
      RoutineId r = t.nodes[a].routine;
      if (r < routines_.size() && routines_[r]->kind == kinds::kPython) python = routines_[r];
    }
    s.call_site = python ? std::string_view(python->name) : native(s.site);
  }
}

std::string_view CallSites::native(const void* site) {
  auto it = native_.find(site);
  if (it == native_.end()) it = native_.emplace(site, symbolize(site)).first;
  return it->second;
}

}  // namespace sonde
