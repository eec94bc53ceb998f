#include "profile/counted_nodes.hpp"

namespace sonde::analyzers {

std::string counted_nodes_table(const ProfileFile& file) {
  auto st = file.prepare("SELECT EXISTS (SELECT 1 FROM waits)");
  return st.step() && st.int64(0) != 0 ? "counted_nodes" : "nodes";
}

}  // namespace sonde::analyzers
