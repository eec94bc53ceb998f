#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <optional>
#include <vector>

#include "base/table_format.hpp"
#include "export/export.hpp"
#include "metrics/share_change.hpp"
#include "sonde/routine_kinds.hpp"

namespace sonde::analyzers {
namespace {

constexpr double kWidth = 1200;  // the image
constexpr double kMargin = 10;   // left and right
constexpr double kRow = 17;      // one frame's row
constexpr double kHeader = 48;   // title and legend
constexpr double kFooter = 24;
constexpr double kMinWidth = 0.3;   // px: narrower frames (and what they call) are not drawn
constexpr double kCharWidth = 6.7;  // px per character at 11 px monospace

// One hue per kind of frame, so Python, library and GPU time stand apart at a glance.
struct KindColour {
  const char* kind;
  int hue, saturation;
};
// The last entry is for any other kind (a wrapper's own, native code).
constexpr KindColour kColours[] = {
    {"root", 0, 0},     {"python", 210, 60}, {"builtin", 190, 55}, {"region", 280, 45},
    {"blas", 25, 85},   {"onednn", 10, 75},  {"cuda", 120, 50},    {"cublas", 100, 55},
    {"cudnn", 140, 50}, {"nccl", 160, 50},   {"gpu", 85, 55},      {"torch", 330, 50},
    {"native", 50, 75},
};

const KindColour& colour_of(const std::string& kind) {
  for (const KindColour& c : kColours)
    if (kind == c.kind) return c;
  return std::end(kColours)[-1];
}

std::string fill(const CallNode& node) {
  const KindColour& c = colour_of(node.kind);
  // Neighbours of one kind differ a little in lightness, as in flamegraph.pl.
  auto shade = static_cast<int>(std::hash<std::string>()(node.name) % 16);
  return fmt::format("hsl({},{}%,{}%)", c.hue, c.saturation, 62 + shade);
}

// Text in SVG: visible() turns control characters and bytes that are not UTF-8 into escapes
// (XML cannot hold most control characters at all), then the markup characters become entities,
// so a routine named <img src=x onerror=alert(1)> is text.
std::string xml_text(std::string_view raw) {
  std::string out;
  for (char c : visible(raw)) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

// The label that fits `width` px: whole UTF-8 characters, ".." where cut.
std::string label(const std::string& name, double width) {
  std::string shown = visible(name);
  auto fits = static_cast<std::size_t>(std::max(0.0, (width - 6) / kCharWidth));
  std::size_t chars = 0, cut = shown.size();
  for (std::size_t i = 0; i < shown.size(); ++i) {
    if ((static_cast<unsigned char>(shown[i]) & 0xC0) == 0x80) continue;
    if (chars == fits - 2 && cut == shown.size()) cut = i;
    if (++chars > fits) return fits < 3 ? std::string() : xml_text(shown.substr(0, cut) + "..");
  }
  return xml_text(shown);
}

class FlameWriter {
 public:
  FlameWriter(std::ostream& out, double total_ns, int depth, const PathShares* shares = nullptr)
      : out_(out),
        scale_((kWidth - 2 * kMargin) / std::max(total_ns, 1.0)),
        total_(total_ns),
        depth_(depth),
        shares_(shares) {}

  // The frames from `root` down, parents before their callees, each a <g> of its own beside
  // the others: nested as the call tree, a 300-deep recursion's file was refused by libxml2's
  // readers ("Excessive depth in document: 256", rsvg-convert and lxml among them), and hovering
  // a frame outlined every frame under the pointer's column. Walked with a stack of its own, not
  // the C stack's: a 13,879-deep Python recursion's profile overflowed it (SIGSEGV), once the
  // hook recorded that deep (8281873).
  void frames(const CallNode& root, double x) {
    struct Open {
      const CallNode* node;
      int level;
      std::size_t next;  // the next child to draw
      double child_x;    // where it goes
    };
    std::vector<Open> open;
    frame(root, x, 0, "all threads");
    open.push_back({&root, 0, 0, x});
    while (!open.empty()) {
      Open& top = open.back();
      if (top.next == top.node->children.size()) {
        open.pop_back();
        continue;
      }
      const CallNode& child = top.node->children[top.next++];
      double cx = top.child_x;
      double cw = static_cast<double>(child.incl_ns) * scale_;
      top.child_x += cw;
      if (cw < kMinWidth) {
        ++hidden_;
        continue;
      }
      int level = top.level + 1;  // before push_back, which may move `top`
      // An empty name is shown as folded stacks show it.
      frame(child, cx, level, child.name.empty() ? "<empty>" : child.name.str());
      open.push_back({&child, level, 0, cx});
    }
  }
  int hidden() const { return hidden_; }

 private:
  // One frame's <g>.
  void frame(const CallNode& node, double x, int level, const std::string& shown_name) {
    double w = static_cast<double>(node.incl_ns) * scale_;
    double y = kHeader + (depth_ - level) * kRow;
    std::string colour = fill(node), change;
    if (shares_ != nullptr) {
      PathShare s = shares_->of(node);
      colour = share_change_fill(s);
      change = s.is_new() ? fmt::format("share {:.2f} %, not in the baseline", 100 * s.after)
                          : fmt::format(
                                "share {:.2f} % -> {:.2f} % ({:+.1f} % of its share "
                                "in the baseline)",
                                100 * s.before, 100 * s.after, 100 * *s.change());
    }
    out_ << fmt::format(
        "<g class=\"f\"><title>{}\n{}: {:.6f} s inclusive ({:.2f} % of busy time), "
        "{:.6f} s exclusive, {} calls{}</title>"
        "<rect x=\"{:.3f}\" y=\"{:.1f}\" width=\"{:.3f}\" height=\"{:.1f}\" fill=\"{}\"/>",
        xml_text(shown_name), xml_text(node.kind), node.incl_ns / 1e9,
        100.0 * node.incl_ns / std::max(total_, 1.0), node.excl_ns / 1e9, node.calls,
        change.empty() ? "" : "\n" + xml_text(change), x, y, w, kRow - 1, colour);
    if (std::string text = label(shown_name, w); !text.empty())
      out_ << fmt::format("<text x=\"{:.3f}\" y=\"{:.1f}\">{}</text>", x + 3, y + kRow - 5, text);
    out_ << "</g>\n";
  }

  std::ostream& out_;
  double scale_, total_;
  int depth_;
  const PathShares* shares_;
  int hidden_ = 0;
};

// The depth of the deepest frame that will be drawn, and the kinds drawn (a stack of its own,
// as FlameWriter::frames).
int drawn_depth(const CallNode& root, double scale, std::map<std::string, int>& kinds) {
  int deepest = 0;
  std::vector<std::pair<const CallNode*, int>> todo{{&root, 0}};
  while (!todo.empty()) {
    auto [node, level] = todo.back();
    todo.pop_back();
    ++kinds[node->kind];
    deepest = std::max(deepest, level);
    for (const CallNode& child : node->children)
      if (static_cast<double>(child.incl_ns) * scale >= kMinWidth)
        todo.emplace_back(&child, level + 1);
  }
  return deepest;
}

}  // namespace

void write_svg_flamegraph(const ProfileFile& file, std::ostream& out, const ProfileFile* before) {
  CallNode root = load_merged_tree(file);
  sort_by_inclusive(root);
  // After the sort: the shares are looked up by node.
  std::optional<PathShares> baseline;
  if (before != nullptr) baseline.emplace(root, load_merged_tree(*before));
  auto total = static_cast<double>(root.incl_ns);
  double scale = (kWidth - 2 * kMargin) / std::max(total, 1.0);
  std::map<std::string, int> kinds;
  int depth = drawn_depth(root, scale, kinds);
  double height = kHeader + (depth + 1) * kRow + kFooter;
  std::string name = std::filesystem::path(file.path()).filename().string();

  out << fmt::format(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1:.0f}\" "
      "viewBox=\"0 0 {0} {1:.0f}\">\n"
      "<style>text{{font-family:monospace;font-size:11px;fill:#000}} "
      "g.f:hover>rect{{stroke:#000;stroke-width:0.5}}</style>\n"
      "<rect width=\"100%\" height=\"100%\" fill=\"#fff\"/>\n"
      "<text x=\"{2}\" y=\"18\" style=\"font-size:14px\">sonde {5}flame graph: {3}, {4:.3f} s on "
      "busy threads (width: inclusive time, merged over threads{6})</text>\n",
      kWidth, height, kMargin, xml_text(name), total / 1e9, baseline ? "differential " : "",
      baseline ? fmt::format("; colour: each path's share of the busy time against {} "
                             "({:.3f} s), red grew, blue shrank",
                             xml_text(std::filesystem::path(before->path()).filename().string()),
                             baseline->before_total_ns() / 1e9)
               : std::string());
  double x = kMargin;
  auto key = [&](const std::string& fill, const std::string& text) {
    out << fmt::format(
        "<rect x=\"{:.0f}\" y=\"27\" width=\"12\" height=\"12\" fill=\"{}\"{}/>"
        "<text x=\"{:.0f}\" y=\"37\">{}</text>\n",
        x, fill, baseline ? " stroke=\"#999\" stroke-width=\"0.5\"" : "", x + 16, xml_text(text));
    x += 24 + static_cast<double>(text.size()) * kCharWidth;
  };
  if (baseline) {  // colour is the change, not the kind
    for (const ShareChangeKey& k : share_change_legend()) key(k.fill, k.label);
  } else {
    for (const auto& [kind, count] : kinds)
      if (kind != kinds::kRoot)
        key(fmt::format("hsl({},{}%,68%)", colour_of(kind).hue, colour_of(kind).saturation), kind);
  }
  FlameWriter w(out, total, depth, baseline ? &*baseline : nullptr);
  w.frames(root, kMargin);
  out << fmt::format(
      "<text x=\"{}\" y=\"{:.0f}\">{}</text>\n</svg>\n", kMargin, height - 8,
      w.hidden() > 0
          ? fmt::format("{} call paths narrower than {} px (and what they call) not drawn",
                        w.hidden(), kMinWidth)
          : std::string("every call path drawn"));
}

}  // namespace sonde::analyzers
