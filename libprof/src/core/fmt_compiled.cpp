// fmt's implementation, compiled once for all of sonde's binaries. fmt's header-only mode (its
// CMake target fmt::fmt-header-only) puts format-inl.h into every file that formats, some 40 %
// of each one's compile time; linking Debian's libfmt.so instead would make libsonde.so and the
// tool need it where the wheels run (a venv without Debian's libraries). This file holds the
// functions format.h declares and the instances of its templates that other files name but,
// outside header-only mode, do not make themselves.
#include <fmt/format-inl.h>

FMT_BEGIN_NAMESPACE
namespace detail {

template auto dragonbox::to_decimal(float x) noexcept -> dragonbox::decimal_fp<float>;
template auto dragonbox::to_decimal(double x) noexcept -> dragonbox::decimal_fp<double>;

template locale_ref::locale_ref(const std::locale& loc);
template auto locale_ref::get<std::locale>() const -> std::locale;

template auto thousands_sep_impl(locale_ref) -> thousands_sep_result<char>;
template auto decimal_point_impl(locale_ref) -> char;
template void buffer<char>::append(const char*, const char*);
template void vformat_to(buffer<char>&, string_view, basic_format_args<FMT_BUFFER_CONTEXT(char)>,
                         locale_ref);

}  // namespace detail
FMT_END_NAMESPACE
