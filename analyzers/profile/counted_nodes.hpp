// Where a reader that merges threads reads its nodes: the view counted_nodes (store_views.sql:
// without helper threads' waits for work), or nodes itself where the file has no such wait, the
// rows then the same. The view is two parts in no order: sorted by node_id it cost 0.17 s more
// than the table on 1M nodes, which every file without Python threads would pay.
#pragma once

#include <string>

#include "profile/profile_file.hpp"

namespace sonde::analyzers {

std::string counted_nodes_table(const ProfileFile& file);

}  // namespace sonde::analyzers
