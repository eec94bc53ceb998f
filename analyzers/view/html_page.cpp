#include "view/html_page.hpp"

#include <algorithm>
#include <cctype>
#include <optional>
#include <utility>
#include <vector>

namespace sonde::analyzers {

namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Replaces every case-insensitive occurrence of `what` (lower case) by `by`.
std::string replace_all_nocase(std::string_view text, std::string_view what, std::string_view by) {
  std::string folded = lower(text);
  std::string out;
  out.reserve(text.size());
  std::size_t from = 0;
  for (std::size_t at; (at = folded.find(what, from)) != std::string::npos;
       from = at + what.size()) {
    out.append(text.substr(from, at - from));
    out.append(by);
  }
  out.append(text.substr(from));
  return out;
}

using Attributes = std::vector<std::pair<std::string, std::string>>;  // name in lower case

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f'; }

// The attributes of a start tag "<name a=b c='d' e>" (without entity decoding: the names and
// values looked for here are plain).
Attributes parse_attributes(std::string_view tag) {
  Attributes out;
  std::size_t i = 1;
  while (i < tag.size() && !is_space(tag[i]) && tag[i] != '>' && tag[i] != '/') ++i;
  while (i < tag.size()) {
    while (i < tag.size() && (is_space(tag[i]) || tag[i] == '/')) ++i;
    if (i >= tag.size() || tag[i] == '>') break;
    std::size_t start = i;
    while (i < tag.size() && !is_space(tag[i]) && tag[i] != '=' && tag[i] != '>' && tag[i] != '/')
      ++i;
    std::string name = lower(tag.substr(start, i - start));
    std::string value;
    while (i < tag.size() && is_space(tag[i])) ++i;
    if (i < tag.size() && tag[i] == '=') {
      ++i;
      while (i < tag.size() && is_space(tag[i])) ++i;
      if (i < tag.size() && (tag[i] == '"' || tag[i] == '\'')) {
        char quote = tag[i++];
        std::size_t end = tag.find(quote, i);
        if (end == std::string_view::npos) end = tag.size();
        value = std::string(tag.substr(i, end - i));
        i = end + 1;
      } else {
        start = i;
        while (i < tag.size() && !is_space(tag[i]) && tag[i] != '>') ++i;
        value = std::string(tag.substr(start, i - start));
      }
    }
    out.emplace_back(std::move(name), std::move(value));
  }
  return out;
}

std::optional<std::string> attribute(const Attributes& attrs, std::string_view name) {
  for (const auto& [n, v] : attrs)
    if (n == name) return v;
  return std::nullopt;
}

struct Element {
  std::size_t begin = 0, end = 0;  // [begin, end): the start tag, or the whole element
  Attributes attrs;
};

// The first <tag ...> whose attribute `attr` is `value` (or "./" + value); for a script, up to
// and with its end tag.
std::optional<Element> find_element(std::string_view html, std::string_view tag,
                                    std::string_view attr, std::string_view value) {
  std::string folded = lower(html);
  std::string open = "<" + std::string(tag);
  for (std::size_t at = folded.find(open); at != std::string::npos;
       at = folded.find(open, at + 1)) {
    std::size_t after = at + open.size();
    if (after < folded.size() && !is_space(folded[after]) && folded[after] != '>') continue;
    std::size_t close = folded.find('>', after);
    if (close == std::string::npos) return std::nullopt;
    Element e{at, close + 1, parse_attributes(html.substr(at, close + 1 - at))};
    std::optional<std::string> v = attribute(e.attrs, attr);
    if (!v || (*v != value && *v != "./" + std::string(value))) continue;
    if (tag == "script") {
      std::size_t end_tag = folded.find("</script", e.end);
      if (end_tag == std::string::npos) return std::nullopt;
      std::size_t end = folded.find('>', end_tag);
      e.end = end == std::string::npos ? folded.size() : end + 1;
    }
    return e;
  }
  return std::nullopt;
}

void erase(std::string& html, const std::optional<Element>& e) {
  if (e) html.erase(e->begin, e->end - e->begin);
}

// Before the last "</tag>", else at the end; returns where.
std::size_t insert_before_close(std::string& html, std::string_view tag, const std::string& text) {
  std::size_t at = lower(html).rfind("</" + std::string(tag));
  if (at == std::string::npos) at = html.size();
  html.insert(at, text);
  return at;
}

}  // namespace

void ScriptJsonEscaper::write(std::string_view json) {
  // U+2028 and U+2029 are E2 80 A8 and E2 80 A9: the first two bytes are held until the third
  // says which, so a piece may end between them. The bytes between the ones that matter are
  // copied as runs.
  std::size_t run = 0;
  for (std::size_t i = 0; i < json.size(); ++i) {
    char c = json[i];
    if (held_ == 0 && c != '\xe2' && c != '<' && c != '>' && c != '&') continue;
    buffer_.append(json.substr(run, i - run));
    run = i + 1;
    if (held_ == 2 && (c == '\xa8' || c == '\xa9')) {
      buffer_ += c == '\xa8' ? "\\u2028" : "\\u2029";
      held_ = 0;
      continue;
    }
    if (held_ == 1 && c == '\x80') {
      held_ = 2;
      continue;
    }
    release_held();
    if (c == '\xe2') {
      held_ = 1;
    } else if (c == '<') {
      buffer_ += "\\u003c";
    } else if (c == '>') {
      buffer_ += "\\u003e";
    } else if (c == '&') {
      buffer_ += "\\u0026";
    } else {
      buffer_ += c;
    }
  }
  buffer_.append(json.substr(run));
  if (buffer_.size() >= (1u << 20)) flush();
}

void ScriptJsonEscaper::release_held() {
  if (held_ >= 1) buffer_ += '\xe2';
  if (held_ == 2) buffer_ += '\x80';
  held_ = 0;
}

void ScriptJsonEscaper::flush() {
  out_(buffer_);
  buffer_.clear();
}

void ScriptJsonEscaper::finish() {
  release_held();
  flush();
}

std::string escape_json_for_script(std::string_view json) {
  std::string out;
  out.reserve(json.size() + json.size() / 16);
  ScriptJsonEscaper escaper([&out](std::string_view piece) { out += piece; });
  escaper.write(json);
  escaper.finish();
  return out;
}

std::string escape_inline_script(std::string_view js) {
  std::string out = replace_all_nocase(js, "</script", "\\x3C/script");
  out = replace_all_nocase(out, "<script", "\\x3Cscript");
  return replace_all_nocase(out, "<!--", "\\x3C!--");
}

std::string escape_inline_style(std::string_view css) {
  return replace_all_nocase(css, "</style", "\\3C /style");
}

StandalonePage standalone_html_around_data(const ViewerAssets& assets) {
  std::string html = assets.index_html;
  // A placeholder data element of the page's own would be a second one with the same id.
  erase(html, find_element(html, "script", "id", "sonde-data"));

  std::string style = "<style>\n" + escape_inline_style(assets.app_css) + "\n</style>";
  if (auto link = find_element(html, "link", "href", "app.css")) {
    html.replace(link->begin, link->end - link->begin, style);
  } else {
    insert_before_close(html, "head", style + "\n");
  }

  std::optional<Element> script = find_element(html, "script", "src", "app.js");
  bool module = script && lower(attribute(script->attrs, "type").value_or("")) == "module";
  erase(html, script);
  const std::string data_tag = "<script id=\"sonde-data\" type=\"application/json\">";
  std::string body = data_tag + "</script>\n<script" + (module ? " type=\"module\"" : "") + ">\n" +
                     escape_inline_script(assets.app_js) + "\n</script>\n";
  std::size_t at = insert_before_close(html, "body", body) + data_tag.size();
  return {html.substr(0, at), html.substr(at)};
}

std::string make_standalone_html(const ViewerAssets& assets, std::string_view bundle_json) {
  StandalonePage page = standalone_html_around_data(assets);
  return page.before + escape_json_for_script(bundle_json) + page.after;
}

}  // namespace sonde::analyzers
