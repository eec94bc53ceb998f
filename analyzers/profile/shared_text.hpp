// A routine's name, kind, file or place as every node of it shows them: one copy of each text
// for the process's life (interned), so a tree of a million nodes holds a pointer per field
// rather than a string and its heap block (docs/performance.md, section 5b).
#pragma once

#include <fmt/format.h>

#include <compare>
#include <ostream>
#include <string>
#include <string_view>

namespace sonde::analyzers {

class SharedText {
 public:
  SharedText() : text_(&none()) {}
  // The interned copy of `text` (made on first use; safe from any thread).
  explicit SharedText(std::string_view text);

  const std::string& str() const { return *text_; }
  operator const std::string&() const { return *text_; }
  operator std::string_view() const { return *text_; }
  const char* c_str() const { return text_->c_str(); }
  bool empty() const { return text_->empty(); }
  bool starts_with(std::string_view prefix) const { return text_->starts_with(prefix); }
  bool ends_with(std::string_view suffix) const { return text_->ends_with(suffix); }

  // Interned: equal texts are one copy, so equality is the pointers'.
  friend bool operator==(SharedText a, SharedText b) { return a.text_ == b.text_; }
  friend bool operator==(SharedText a, std::string_view b) { return *a.text_ == b; }
  friend bool operator==(SharedText a, const char* b) { return *a.text_ == b; }
  friend std::strong_ordering operator<=>(SharedText a, SharedText b) {
    return std::string_view(*a.text_) <=> std::string_view(*b.text_);
  }
  friend std::ostream& operator<<(std::ostream& out, SharedText t) { return out << *t.text_; }

 private:
  static const std::string& none();
  const std::string* text_;
};

}  // namespace sonde::analyzers

template <>
struct fmt::formatter<sonde::analyzers::SharedText> : fmt::formatter<std::string_view> {
  auto format(const sonde::analyzers::SharedText& t, format_context& ctx) const {
    return fmt::formatter<std::string_view>::format(std::string_view(t), ctx);
  }
};
