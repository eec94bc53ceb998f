// The one schema version of a sonde profile: what libsonde writes and the newest the analyzers
// read. Bumped whenever a table or a public view changes meaning (docs/schema.md).
#pragma once

namespace sonde {

// 1: the first.
inline constexpr int kSchemaVersion = 1;

}  // namespace sonde
