// The meta rows of a profile this build makes: its schema version, its maker, and a hash of the
// schema's text. A process joining a file whose hash is this build's has nothing to create;
// running the schema's CREATE ... IF NOT EXISTS statements cost each joining process (every
// child of a run) about 1.5 ms.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <string>

#include "schema_sql.hpp"  // generated from store_schema.sql
#include "store/schema_version.hpp"

namespace sonde {

constexpr uint64_t schema_sql_hash() {  // FNV-1a, 64 bits
  uint64_t h = 14695981039346656037ull;
  for (const char* c = kSchemaSql; *c != '\0'; ++c) h = (h ^ uint8_t(*c)) * 1099511628211ull;
  return h;
}

inline std::string schema_sql_hash_text() { return fmt::format("{:016x}", schema_sql_hash()); }

inline std::string schema_meta_sql() {
  return fmt::format(
      "INSERT OR IGNORE INTO meta VALUES ('schema_version', '{}'), ('created_by', 'sonde {}'); "
      "INSERT OR REPLACE INTO meta VALUES ('schema_sql', '{}')",
      kSchemaVersion, SONDE_VERSION, schema_sql_hash_text());
}

}  // namespace sonde
