// sonde view's pieces that need no socket: the --html page's escaping and inlining, the token.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "view/html_page.hpp"
#include "view/view_server.hpp"

using namespace sonde::analyzers;

namespace {

const std::string kHostile = "</script><img src=x onerror=alert(1)><!-- & \u2028\u2029 > ";

std::size_t count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

ViewerAssets assets(std::string index) {
  return {"/nowhere", std::move(index), "console.log('</SCRIPT><!--<script>')", "a{}</style>"};
}

}  // namespace

TEST(ViewHtml, DataElementHoldsTheSameJsonWithoutMarkup) {
  nlohmann::json bundle = {{"format_version", 1}, {"names", {kHostile, "plain"}}};
  std::string text = bundle.dump();
  std::string escaped = escape_json_for_script(text);
  for (const char* raw : {"<", ">", "&", "\u2028", "\u2029"})
    EXPECT_EQ(escaped.find(raw), std::string::npos) << raw;
  EXPECT_EQ(nlohmann::json::parse(escaped), bundle);
}

TEST(ViewHtml, DataEscapedPieceByPieceIsTheSameAsWhole) {
  // --html streams the bundle through the escaper in pieces: a piece may end inside U+2028.
  std::string text =
      "a<b>&c\u2028d\u2029e\xe2\x80\x99"
      "f\xe2"
      "g\xe2\x80"
      "h\u2028";
  std::string whole = escape_json_for_script(text);
  EXPECT_EQ(whole,
            "a\\u003cb\\u003e\\u0026c\\u2028d\\u2029e\xe2\x80\x99"
            "f\xe2"
            "g\xe2\x80"
            "h\\u2028");
  for (std::size_t a = 0; a <= text.size(); ++a) {
    for (std::size_t b = a; b <= text.size(); ++b) {
      std::string out;
      ScriptJsonEscaper escaper([&out](std::string_view piece) { out += piece; });
      escaper.write(std::string_view(text).substr(0, a));
      escaper.write(std::string_view(text).substr(a, b - a));
      escaper.write(std::string_view(text).substr(b));
      escaper.finish();
      EXPECT_EQ(out, whole) << a << " " << b;
    }
  }
}

TEST(ViewHtml, InlinedCodeCannotCloseItsElement) {
  std::string js =
      escape_inline_script("a = '</script>'; b = '</ScRiPt '; c = '<!--'; d = '<script>'");
  EXPECT_EQ(js, "a = '\\x3C/script>'; b = '\\x3C/script '; c = '\\x3C!--'; d = '\\x3Cscript>'");
  EXPECT_EQ(escape_inline_style("x{content:'</STYLE>'}"), "x{content:'\\3C /style>'}");
}

TEST(ViewHtml, PageInlinesTheAssetsAndPutsTheDataBeforeTheApp) {
  std::string page = make_standalone_html(
      assets("<html><head><link rel=\"stylesheet\" href=\"app.css\"></head><body><p>x</p>"
             "<script id='sonde-data' type='application/json'>{}</script>"
             "<script defer src='./app.js'></script></body></html>"),
      nlohmann::json{{"name", kHostile}}.dump());
  EXPECT_EQ(page.find("app.css"), std::string::npos);
  EXPECT_EQ(page.find("app.js"), std::string::npos);
  EXPECT_EQ(page.find(kHostile), std::string::npos);
  EXPECT_EQ(count(page, "<script"), 2u);  // the placeholder data element is replaced
  EXPECT_EQ(count(page, "</script>"), 2u);
  EXPECT_EQ(count(page, "</style>"), 1u);
  std::size_t data = page.find("<script id=\"sonde-data\" type=\"application/json\">");
  std::size_t app = page.find("<script>");
  ASSERT_NE(data, std::string::npos);
  EXPECT_LT(page.find("<p>x</p>"), data);  // at the end of the body, where defer would run it
  EXPECT_LT(data, app);
  EXPECT_LT(app, page.find("</body>"));
}

TEST(ViewHtml, ModuleScriptStaysAModuleAndMissingTagsAreAdded) {
  std::string page = make_standalone_html(
      assets("<html><head></head><body><script type=\"module\" src=\"app.js\"></script></body>"),
      "{}");
  EXPECT_NE(page.find("<script type=\"module\">"), std::string::npos);
  EXPECT_LT(page.find("<style>"), page.find("</head>"));
}

TEST(ViewToken, RandomHexOf128Bits) {
  std::set<std::string> seen;
  for (int i = 0; i < 100; ++i) {
    std::string t = make_token();
    EXPECT_EQ(t.size(), 32u);
    EXPECT_EQ(t.find_first_not_of("0123456789abcdef"), std::string::npos);
    seen.insert(t);
  }
  EXPECT_EQ(seen.size(), 100u);
}

TEST(ViewToken, MatchesOnlyTheWholeToken) {
  EXPECT_TRUE(token_matches("00ff", "00ff"));
  EXPECT_FALSE(token_matches("00fe", "00ff"));
  EXPECT_FALSE(token_matches("00f", "00ff"));
  EXPECT_FALSE(token_matches("00ff0", "00ff"));
  EXPECT_FALSE(token_matches("", ""));
}
