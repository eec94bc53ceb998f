// Names the call site of each GEMM shape in a snapshot, before the store writes it: the store
// writes what it is given and decides no attribution (STYLE.md, rule 1).
#pragma once

#include <string>
#include <unordered_map>
#include <vector>

#include "core/routine_registry.hpp"
#include "core/snapshot.hpp"

namespace sonde {

class CallSites {
 public:
  // Sets each shape's call_site: the nearest Python frame above the call (what a Python user
  // wrote), else the native caller's 'function [object]'. The names stay valid while this
  // object and `registry` live.
  void name(ThreadSnapshot& t, RoutineRegistry& registry);

 private:
  std::string_view native(const void* site);
  std::vector<const Routine*> routines_;                 // the registry's, by id
  std::unordered_map<const void*, std::string> native_;  // symbolized once per address
};

}  // namespace sonde
