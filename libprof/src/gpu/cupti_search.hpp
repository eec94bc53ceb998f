// Where to look for libcupti: the CUPTI of the CUDA runtime the program loaded, beside that
// runtime first (a toolkit's lib64, or pip's nvidia-* packages), then the loader's search and
// the usual install paths. Needs no CUPTI header, so the unit tests build without one.
#pragma once

#include <string>
#include <vector>

namespace sonde {

// The libcudart.so.<major> this process has loaded (its path), or empty: a program with the
// runtime linked statically, or one that uses the driver alone.
std::string loaded_cuda_runtime();
// The runtime's major from its file name (libcudart.so.12.4.127 -> 12), 0 if none.
int cuda_runtime_major(const std::string& cudart_path);
// The files to try, in order. `driver_version`: cuDriverGetVersion's answer (13000 for CUDA
// 13.0), 0 if unknown; it orders the majors when no runtime is loaded (a newer CUPTI needs a
// driver at least as new).
std::vector<std::string> cupti_candidates(const std::string& cudart_path, int driver_version);

}  // namespace sonde
