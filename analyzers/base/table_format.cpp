#include "base/table_format.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "base/error.hpp"

namespace sonde::analyzers {
namespace {

std::string text_of(const Cell& cell, int precision) {
  if (const auto* i = std::get_if<std::int64_t>(&cell)) return fmt::format("{}", *i);
  if (const auto* d = std::get_if<double>(&cell)) {
    if (!std::isfinite(*d) || precision == Column::kAsStored) return fmt::format("{}", *d);
    return fmt::format("{:.{}f}", *d, precision);
  }
  if (const auto* s = std::get_if<std::string>(&cell)) return visible(*s);
  return "-";
}

// Length of the well-formed UTF-8 sequence at text[i] (RFC 3629: no overlong forms, no
// surrogates, nothing past U+10FFFF), 0 if there is none.
std::size_t utf8_length(std::string_view text, std::size_t i) {
  auto at = [&](std::size_t k) { return static_cast<unsigned char>(text[k]); };
  unsigned char b = at(i);
  std::size_t n = b < 0x80                 ? 1
                  : b >= 0xc2 && b <= 0xdf ? 2
                  : b >= 0xe0 && b <= 0xef ? 3
                  : b >= 0xf0 && b <= 0xf4 ? 4
                                           : 0;
  if (n <= 1 || i + n > text.size()) return n == 1 ? 1 : 0;
  unsigned char lo = 0x80, hi = 0xbf;  // the second byte's range
  if (b == 0xe0) lo = 0xa0;
  if (b == 0xed) hi = 0x9f;
  if (b == 0xf0) lo = 0x90;
  if (b == 0xf4) hi = 0x8f;
  if (at(i + 1) < lo || at(i + 1) > hi) return 0;
  for (std::size_t k = 2; k < n; ++k)
    if (at(i + k) < 0x80 || at(i + k) > 0xbf) return 0;
  return n;
}

}  // namespace

Format parse_format(std::string_view name) {
  if (name == "text") return Format::kText;
  if (name == "csv") return Format::kCsv;
  if (name == "json") return Format::kJson;
  throw Error(fmt::format("unknown format '{}' (expected text, csv or json)", name), 2);
}

std::string render_text(const Table& table) {
  const std::size_t ncol = table.columns.size();
  std::vector<std::vector<std::string>> cells(table.rows.size());
  std::vector<std::size_t> width(ncol);
  // Numbers, and columns of nothing but NULLs, are right-aligned; any text makes a column left.
  std::vector<bool> right(ncol, !table.rows.empty());
  for (std::size_t c = 0; c < ncol; ++c) width[c] = table.columns[c].title.size();
  for (std::size_t r = 0; r < table.rows.size(); ++r) {
    for (std::size_t c = 0; c < ncol && c < table.rows[r].size(); ++c) {
      const Cell& cell = table.rows[r][c];
      cells[r].push_back(text_of(cell, table.columns[c].precision));
      width[c] = std::max(width[c], cells[r].back().size());
      if (std::holds_alternative<std::string>(cell)) right[c] = false;
    }
  }
  auto line = [&](const std::vector<std::string>& fields) {
    std::string out;
    for (std::size_t c = 0; c < ncol; ++c) {
      const std::string& f = c < fields.size() ? fields[c] : std::string();
      if (c > 0) out += "  ";
      if (right[c]) {
        out += fmt::format("{:>{}}", f, width[c]);
      } else if (c + 1 < ncol) {
        out += fmt::format("{:<{}}", f, width[c]);
      } else {
        out += f;  // no trailing blanks after the last column
      }
    }
    while (!out.empty() && out.back() == ' ') out.pop_back();
    return out + "\n";
  };
  std::vector<std::string> titles;
  std::size_t total = 0;
  for (std::size_t c = 0; c < ncol; ++c) {
    titles.push_back(table.columns[c].title);
    total += width[c] + (c > 0 ? 2 : 0);
  }
  std::string out = line(titles);
  out += std::string(total, '-') + "\n";
  for (const auto& row : cells) out += line(row);
  return out;
}

namespace {

// Characters that are shown as nothing, or change how what follows is shown: zero-width
// spaces and joiners, the bidirectional marks, embeddings, overrides and isolates (a name can
// show as another's, as in "Trojan source"), the line and paragraph separators (which split a
// folded stack's line for Python's splitlines), the byte-order mark. A red team's names
// carried them through every text output (2026-12-07).
bool invisible(std::uint32_t cp) {
  return (cp >= 0x200b && cp <= 0x200f) || (cp >= 0x2028 && cp <= 0x202e) ||
         (cp >= 0x2060 && cp <= 0x2064) || (cp >= 0x2066 && cp <= 0x2069) || cp == 0xfeff;
}

std::uint32_t code_point3(std::string_view text, std::size_t i) {
  return (std::uint32_t(static_cast<unsigned char>(text[i]) & 0x0f) << 12) |
         (std::uint32_t(static_cast<unsigned char>(text[i + 1]) & 0x3f) << 6) |
         std::uint32_t(static_cast<unsigned char>(text[i + 2]) & 0x3f);
}

}  // namespace

std::string visible(std::string_view text) {
  bool plain = std::all_of(text.begin(), text.end(), [](char c) {
    return static_cast<unsigned char>(c) >= 0x20 && static_cast<unsigned char>(c) < 0x7f;
  });
  if (plain) return std::string(text);
  std::string out;
  for (std::size_t i = 0; i < text.size();) {
    auto b = static_cast<unsigned char>(text[i]);
    std::size_t n = utf8_length(text, i);
    bool c1 = n == 2 && b == 0xc2 && static_cast<unsigned char>(text[i + 1]) < 0xa0;
    if (n == 1 && b >= 0x20 && b != 0x7f) {
      out += text[i];
    } else if (n == 3 && invisible(code_point3(text, i))) {
      out += fmt::format("\\u{:04x}", code_point3(text, i));
    } else if (n > 1 && !c1) {
      out.append(text.substr(i, n));
    } else {
      if (n == 0) n = 1;
      for (std::size_t k = i; k < i + n; ++k) {
        auto c = static_cast<unsigned char>(text[k]);
        if (c == '\n')
          out += "\\n";
        else if (c == '\t')
          out += "\\t";
        else if (c == '\r')
          out += "\\r";
        else
          out += fmt::format("\\x{:02x}", c);
      }
    }
    i += n;
  }
  return out;
}

std::string valid_utf8(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    std::size_t n = utf8_length(text, i);
    if (n == 0) {
      out += "\xef\xbf\xbd";
      ++i;
    } else {
      out.append(text.substr(i, n));
      i += n;
    }
  }
  return out;
}

std::string dump_json(const Json& value, int indent) {
  return value.dump(indent, ' ', false, Json::error_handler_t::replace);
}

std::string csv_escape(std::string_view field) {
  if (field.find_first_of(",\"\n\r") == std::string_view::npos) return std::string(field);
  std::string out = "\"";
  for (char ch : field) {
    if (ch == '"') out += '"';
    out += ch;
  }
  return out + "\"";
}

std::string csv_header(const Table& table) {
  std::string out;
  for (std::size_t c = 0; c < table.columns.size(); ++c)
    out += (c ? "," : "") + csv_escape(table.columns[c].key);
  return out + "\n";
}

std::string csv_row(const std::vector<Cell>& row) {
  std::string out;
  for (std::size_t c = 0; c < row.size(); ++c) {
    if (c) out += ",";
    const Cell& cell = row[c];
    if (const auto* i = std::get_if<std::int64_t>(&cell))
      out += fmt::format("{}", *i);
    else if (const auto* d = std::get_if<double>(&cell))
      out += fmt::format("{}", *d);
    else if (const auto* s = std::get_if<std::string>(&cell))
      out += csv_escape(*s);
  }
  return out + "\n";
}

std::string render_csv(const Table& table) {
  std::string out = csv_header(table);
  for (const auto& row : table.rows) out += csv_row(row);
  return out;
}

Json cell_to_json(const Cell& cell) {
  if (const auto* i = std::get_if<std::int64_t>(&cell)) return *i;
  if (const auto* d = std::get_if<double>(&cell)) return std::isfinite(*d) ? Json(*d) : nullptr;
  if (const auto* s = std::get_if<std::string>(&cell)) return *s;
  return nullptr;
}

Json render_json(const Table& table) {
  auto rows = Json::array();
  for (const auto& row : table.rows) {
    Json obj = Json::object();
    for (std::size_t c = 0; c < table.columns.size() && c < row.size(); ++c)
      obj[table.columns[c].key] = cell_to_json(row[c]);
    rows.push_back(std::move(obj));
  }
  return rows;
}

}  // namespace sonde::analyzers
