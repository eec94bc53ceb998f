// Finding the real definition of an interposed function.
#pragma once

#include <string>

namespace sonde {

// dlsym(RTLD_NEXT) first; when that finds nothing (the library was dlopen'ed RTLD_LOCAL, as
// Python does for numpy's and torch's extension modules and so for their libblas), every
// loaded object is asked in turn. Never returns sonde's own definition. nullptr if none.
void* find_real_symbol(const char* name);

// The file of the loaded object that contains `address`, resolved to a real path; '' if none.
std::string object_path_of(const void* address);

// `name` as the loaded object containing `address` sees it (its own lookup scope: Debian's
// libblas.so.3 reaches libopenblas.so.0's symbols), so that another library of the same kind
// loaded beside it is never asked. nullptr if none.
void* symbol_beside(const void* address, const char* name);

[[noreturn]] void missing_real_symbol(const char* name);

// True when `address` lies in libsonde itself.
bool is_own_address(const void* address);

}  // namespace sonde
