// `sonde view --html`: the viewer and its data as one self-contained HTML file.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <utility>

#include "view/viewer_assets.hpp"

namespace sonde::analyzers {

// JSON text made safe inside <script type="application/json">: '<', '>', '&', U+2028 and U+2029
// become \u escapes, so no "</script>" or "<!--" in a name can end the element. Still the same
// JSON (those characters only occur inside strings).
std::string escape_json_for_script(std::string_view json);

// The same escaping piece by piece, handed to `out` in blocks of about 1 MB: --html streams
// the bundle into the page.
class ScriptJsonEscaper {
 public:
  explicit ScriptJsonEscaper(std::function<void(std::string_view)> out) : out_(std::move(out)) {}
  void write(std::string_view json);
  void finish();  // hands on what is left

 private:
  void release_held();
  void flush();
  std::function<void(std::string_view)> out_;
  std::string buffer_;
  int held_ = 0;  // bytes of E2 80 held back (the start of U+2028 or U+2029)
};

// JavaScript and CSS made safe to inline: "</script", "<script" and "<!--" (in JS, as \x3C, valid
// in strings, templates and regular expressions) and "</style" (in CSS, as \3C ) cannot close or
// confuse their element.
std::string escape_inline_script(std::string_view js);
std::string escape_inline_style(std::string_view css);

// index.html with its <link href="app.css"> replaced by the style inline, and its
// <script src="app.js"> by the data element (id "sonde-data") followed by the script inline, at
// the end of the body (where a deferred script would run). Loads nothing from elsewhere.
std::string make_standalone_html(const ViewerAssets& assets, std::string_view bundle_json);
// That page without its data: `before` ends with the data element's start tag, `after` begins
// with its end tag; the bundle, escaped, goes between them.
struct StandalonePage {
  std::string before, after;
};
StandalonePage standalone_html_around_data(const ViewerAssets& assets);

}  // namespace sonde::analyzers
