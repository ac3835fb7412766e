// fmt's compiled part for the aarch64 build. Debian's libfmt-dev ships the definitions of fmt's
// out-of-line functions (format-inl.h) but not its library's source: compiled here once, they
// spare every user of fmt the header-only mode's cost (about 4 s a translation unit under load).
// The function templates that fmt's headers declare and leave to the library are instantiated
// for the character types they name.
#include <fmt/format-inl.h>

FMT_BEGIN_NAMESPACE
namespace detail {

template auto dragonbox::to_decimal<float>(float x) noexcept -> dragonbox::decimal_fp<float>;
template auto dragonbox::to_decimal<double>(double x) noexcept -> dragonbox::decimal_fp<double>;
template auto thousands_sep_impl<char>(locale_ref loc) -> thousands_sep_result<char>;
template auto thousands_sep_impl<wchar_t>(locale_ref loc) -> thousands_sep_result<wchar_t>;
template auto decimal_point_impl<char>(locale_ref loc) -> char;
template auto decimal_point_impl<wchar_t>(locale_ref loc) -> wchar_t;
template void vformat_to<char>(buffer<char>& buf, string_view fmt, format_args args, locale_ref loc);

}  // namespace detail
FMT_END_NAMESPACE
