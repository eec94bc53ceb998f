// What sonde uses of libtorch_cpu's C++ ABI, declared here so that libsonde needs no torch header
// and no link against libtorch: at::RecordFunctionCallback's layout and the exported functions
// that register one and read an event's name and input sizes. The layout and the mangled names
// are those of aten/src/ATen/record_function.h in PyTorch 1.13 and 2.x (checked on 1.13.1 here;
// 2.x's header declares the same members in the same order). RecordFunction's inline accessors
// (scope(), seqNr(), inputs()) read members whose offsets moved in 2.x: sonde never calls them.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace sonde::torch_abi {

// at::ObserverContext: the start callback may return one, which RecordFunction hands to the end
// callback and then deletes through its virtual destructor (slot layout: one virtual dtor).
struct ObserverContext {
  virtual ~ObserverContext() = default;
};

struct RecordFunction;  // opaque: only passed back to libtorch's exported functions

using StartCallback = std::unique_ptr<ObserverContext> (*)(const RecordFunction&);
using EndCallback = void (*)(const RecordFunction&, ObserverContext*);

// at::RecordScope, the values sonde registers for.
enum class Scope : int { kFunction = 0, kBackwardFunction = 1, kUserScope = 7 };
constexpr int kScopeCount = 10;  // at::RecordScope::NUM_SCOPES

// at::RecordFunctionCallback: trivially copyable, passed by value to addGlobalCallback.
struct Callback {
  StartCallback start = nullptr;
  EndCallback end = nullptr;
  double sampling_prob = 1.0;
  bool scopes[kScopeCount] = {};
  bool needs_inputs = false;
  bool needs_outputs = false;
  bool needs_ids = false;
};
static_assert(sizeof(Callback) == 40, "at::RecordFunctionCallback is 40 bytes in 1.13 and 2.x");

using CallbackHandle = uint64_t;
using AddGlobalCallback = CallbackHandle (*)(Callback);
using RemoveCallback = void (*)(CallbackHandle);
using Name = const char* (*)(const RecordFunction*);  // const member: `this` first
using InputSizes = std::vector<std::vector<int64_t>> (*)(const RecordFunction&, bool);
using InputTypes = std::vector<std::string> (*)(const RecordFunction&);
using EnableRecordFunction = void (*)(bool);  // this thread's RecordFunction on or off
using HasCallbacks = bool (*)();

constexpr const char* kAddGlobalCallback = "_ZN2at17addGlobalCallbackENS_22RecordFunctionCallbackE";
constexpr const char* kRemoveCallback = "_ZN2at14removeCallbackEm";
constexpr const char* kName = "_ZNK2at14RecordFunction4nameEv";
constexpr const char* kEnableRecordFunction = "_ZN2at20enableRecordFunctionEb";
constexpr const char* kHasThreadLocalCallbacks = "_ZN2at23hasThreadLocalCallbacksEv";
constexpr const char* kHasGlobalCallbacks = "_ZN2at18hasGlobalCallbacksEv";
constexpr const char* kInputSizes = "_ZN5torch8profiler4impl10inputSizesERKN2at14RecordFunctionEb";
// Returns std::string, so only the new string ABI's symbol (Debian's libtorch, wheels from about
// 2.7) matches libsonde's std::string; an old-ABI libtorch has no such symbol and its dtypes are
// not read (torch_library.cpp says so in a note).
constexpr const char* kInputTypes =
    "_ZN5torch8profiler4impl10inputTypesB5cxx11ERKN2at14RecordFunctionE";

}  // namespace sonde::torch_abi
