#include "symbols/loaded_objects.hpp"

#include <link.h>

#include <cstring>

namespace sonde {

std::string loaded_object(std::initializer_list<std::string_view> prefixes) {
  struct Search {
    std::initializer_list<std::string_view> prefixes;
    std::string found;
  } s{prefixes, {}};
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        auto* s = static_cast<Search*>(data);
        if (info->dlpi_name == nullptr) return 0;
        const char* slash = std::strrchr(info->dlpi_name, '/');
        std::string_view base = slash != nullptr ? slash + 1 : info->dlpi_name;
        for (std::string_view p : s->prefixes) {
          if (base.starts_with(p)) {
            s->found = base;
            return 1;
          }
        }
        return 0;
      },
      &s);
  return s.found;
}

}  // namespace sonde
