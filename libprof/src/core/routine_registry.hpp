// Routine descriptions, interned once and named by small integer ids on the hot path.
#pragma once

#include <deque>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "sonde/probe.hpp"

namespace sonde {

struct Routine {
  std::string name, kind, library, file;
  int line = 0;
  DType dtype = DType::kNone;  // the facts of the spec that registered it first
  std::string role;
};

class RoutineRegistry {
 public:
  RoutineRegistry();  // id 0 is the thread root '<thread>'
  RoutineId intern(const RoutineSpec& spec);
  // The routines with ids in [from, size()). They stay where they are for the registry's life
  // (a deque's elements do not move as it grows), so a flush reads them without copies.
  std::vector<const Routine*> since(size_t from);
  // Per routine id: whether it is a measured call (a library call, a Python frame), not the
  // thread root or a user region.
  std::vector<bool> measured_kinds();
  std::mutex& mutex() { return mu_; }

 private:
  std::mutex mu_;
  std::deque<Routine> routines_;
  std::unordered_map<std::string, RoutineId> index_;
};

}  // namespace sonde
