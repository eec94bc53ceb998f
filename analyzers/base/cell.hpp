// One value of a table: what a profile's statement returns and what a table row holds, so the
// table type (table_format.hpp) needs nothing of the profile readers above it.
#pragma once

#include <cstdint>
#include <string>
#include <variant>

namespace sonde::analyzers {

// A value of a result column, typed as SQLite returned it (blobs become a "<blob N bytes>" text).
using Cell = std::variant<std::monostate, std::int64_t, double, std::string>;

}  // namespace sonde::analyzers
