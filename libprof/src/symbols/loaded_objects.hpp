// Which shared objects the process has loaded, by their files' names: the OpenMP runtime a
// tune stage needs, whether libtorch or the CUDA driver is there. dl_iterate_phdr takes the
// loader's lock: not on a loader-free thread (loader_free.hpp).
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>

namespace sonde {

// The base name of the first loaded object whose base name starts with one of `prefixes`
// ("libgomp" finds libgomp.so.1 and pip's libgomp-a34b3233.so.1), or "" where none does.
std::string loaded_object(std::initializer_list<std::string_view> prefixes);

}  // namespace sonde
