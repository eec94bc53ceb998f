// The browser viewer's built files (index.html, app.js, app.css), found beside the executable or
// through SONDE_VIEWER_DIR, and read once: the server never opens a file after start-up.
#pragma once

#include <string>

namespace sonde::analyzers {

struct ViewerAssets {
  std::string dir;  // where they were read from, for messages
  std::string index_html;
  std::string app_js;
  std::string app_css;
};

// $SONDE_VIEWER_DIR when set; else <exe>/../viewer/dist (build tree), then
// <exe>/../share/sonde/viewer (installed). Throws Error naming every place looked at.
std::string find_viewer_dir();

// Reads the three files of `dir`; throws Error naming a missing or unreadable one.
ViewerAssets load_viewer_assets(const std::string& dir);

}  // namespace sonde::analyzers
