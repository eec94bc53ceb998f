// One table type and its three renderings (aligned text, CSV, JSON), shared by every subcommand
// so that numbers are computed once and only their presentation differs.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/cell.hpp"

namespace sonde::analyzers {

// Ordered, so that JSON members come out in the order a reader expects (name first, etc.).
using Json = nlohmann::ordered_json;

// Every --format json output is one object whose first keys say what it is: format_version
// (this, raised when a key changes meaning or goes), subcommand, file (the profile read, where
// there is one), then the command's own keys (cli/command.hpp's print_json; docs/cli.md).
inline constexpr int kJsonFormatVersion = 1;

enum class Format { kText, kCsv, kJson };

// Throws Error for anything but "text", "csv", "json".
Format parse_format(std::string_view name);

struct Column {
  std::string title;  // shown in text output
  std::string key;    // CSV header and JSON member name
  // Digits after the point for floating values in text output; kAsStored: the shortest text
  // that reads back as the same value (1e-09, 147.19596318), as CSV and JSON give it.
  int precision = 3;
  static constexpr int kAsStored = -1;
};

struct Table {
  std::vector<Column> columns;
  std::vector<std::vector<Cell>> rows;
};

// Aligned columns under a header line; numbers right-aligned, NULL shown as "-".
std::string render_text(const Table& table);
// RFC 4180 CSV with a header of column keys; NULL is an empty field.
std::string render_csv(const Table& table);
// render_csv in parts, for a table written as its rows come (one too large to hold whole).
std::string csv_header(const Table& table);
std::string csv_row(const std::vector<Cell>& row);
// An array with one object per row, keyed by column key; NULL is null.
Json render_json(const Table& table);

std::string csv_escape(std::string_view field);
// Text for a terminal: control characters, DEL, C1 controls and bytes that are not UTF-8 are
// shown as escapes (\n, \t, \r, \xNN), so a routine name cannot move the cursor, retitle the
// window or break a line. Every text renderer passes names and other recorded text through it.
std::string visible(std::string_view text);
// The text with each byte that starts no well-formed UTF-8 sequence replaced by U+FFFD: what
// binary formats whose strings must be UTF-8 (marshal's, protobuf's) are given.
std::string valid_utf8(std::string_view text);
// JSON text with invalid UTF-8 replaced by U+FFFD rather than an exception: recorded names and
// arguments are bytes, not necessarily UTF-8.
std::string dump_json(const Json& value, int indent = 2);
Json cell_to_json(const Cell& cell);

}  // namespace sonde::analyzers
