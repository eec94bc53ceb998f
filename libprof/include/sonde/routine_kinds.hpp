// The values of routines.kind and routines.role (docs/schema.md): what the wrappers, the Python
// hook and libprof write and the analyzers read, spelled once. Character arrays, so that both
// a RoutineSpec (const char*) and a comparison with a std::string take them as they are.
#pragma once

namespace sonde::kinds {

inline constexpr char kRoot[] = "root";        // a thread's root node, '<thread>'
inline constexpr char kRegion[] = "region";    // a user region (sonde_region_begin, NVTX)
inline constexpr char kPython[] = "python";    // a Python function
inline constexpr char kBuiltin[] = "builtin";  // a C function called from Python (--builtins)
inline constexpr char kBlas[] = "blas";
inline constexpr char kOnednn[] = "onednn";
inline constexpr char kCuda[] = "cuda";  // the CUDA runtime and driver
inline constexpr char kCublas[] = "cublas";
inline constexpr char kCudnn[] = "cudnn";
inline constexpr char kMpi[] = "mpi";
inline constexpr char kNccl[] = "nccl";
inline constexpr char kTorch[] = "torch";  // a PyTorch operator or process-group collective

// The library the Python hook gives a generator function (one call per generator object).
inline constexpr char kGeneratorLibrary[] = "generator";

}  // namespace sonde::kinds

namespace sonde::roles {

// routines.role of a CUDA API call, as the wrappers' table states it.
inline constexpr char kLaunch[] = "launch";
inline constexpr char kCopy[] = "copy";  // between host and device
inline constexpr char kSync[] = "sync";
inline constexpr char kOther[] = "other";

}  // namespace sonde::roles
