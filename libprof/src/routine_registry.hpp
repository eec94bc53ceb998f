// Routine descriptions, interned once and named by small integer ids on the hot path.
#pragma once

#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "sonde/probe.hpp"

namespace sonde {

struct Routine {
  std::string name, kind, library, file;
  int line = 0;
};

class RoutineRegistry {
 public:
  RoutineRegistry();  // id 0 is the thread root '<thread>'
  RoutineId intern(const RoutineSpec& spec);
  // Copies of the routines with ids in [from, size()).
  std::vector<Routine> since(size_t from);
  std::mutex& mutex() { return mu_; }

 private:
  std::mutex mu_;
  std::vector<Routine> routines_;
  std::unordered_map<std::string, RoutineId> index_;
};

}  // namespace sonde
