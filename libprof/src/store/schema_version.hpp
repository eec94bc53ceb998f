// The one schema version of a sonde profile: what libsonde writes and the newest the analyzers
// read. Bumped whenever a table or a public view changes meaning (docs/schema.md).
#pragma once

namespace sonde {

// 2: shapes.threads (the thread count a call ran with); % of peak against the peak for it.
inline constexpr int kSchemaVersion = 2;

}  // namespace sonde
