// What every interposed function expands to: lazy real-symbol lookup, the measurement around
// the real call, errno preserved. A library's wrappers are a table of entries; each entry
// expands SONDE_INTERCEPT, so no wrapper body is written by hand.
#pragma once

#include <errno.h>

#include <atomic>

#include "core/probe_inline.hpp"
#include "sonde/probe.hpp"
#include "sonde/routine_kinds.hpp"
#include "symbols/real_symbol.hpp"

namespace sonde {

// What SONDE_INTERCEPT_AS's CHOOSE step yields at least: the routine the call is reported as.
struct RoutineChoice {
  RoutineId id;
};

// Measures one call of `real` with routine id `id`; `model` computes the CallCost from the
// arguments and runs only when the call is measured. The probe is inlined (probe_inline.hpp):
// with the model's constants in view, a routine without a shape or a communication keeps none
// of the code that records them.
template <class R, class... P, class Model, class... A>
inline R intercept(R (*real)(P...), RoutineId id, Nesting nesting, const void* site, Model&& model,
                   A... args) {
  if (__builtin_expect(exit_gate_closed(), 0)) wait_at_exit_gate();
  // The caller's stack address and the wrapper's own stack pointer: a call left by a longjmp
  // is found by the next one whose caller lies above the left wrapper (drop_abandoned).
  ThreadState* t =
      inline_probe::open(id, nesting, reinterpret_cast<uintptr_t>(__builtin_dwarf_cfa()),
                         inline_probe::stack_pointer());
  if (t == nullptr) return real(args...);
  // The cost model (and the sampled subnormal check) runs before the clock starts, so the
  // measured time is the real call's alone; errno is the host's again before the call.
  int* err = t->errno_loc;
  int before = *err;
  CallCost cost = model();
  *err = before;
  inline_probe::start(t);
  if constexpr (std::is_void_v<R>) {
    real(args...);
    int saved = *err;
    inline_probe::exit(t, &cost, site);
    *err = saved;
  } else {
    R r = real(args...);
    int saved = *err;
    inline_probe::exit(t, &cost, site);
    *err = saved;
    return r;
  }
}

}  // namespace sonde

// A library function sonde calls itself (a query a cost model asks), as a member of a struct the
// wrapper file builds once: typed by its header's declaration, resolved as the real functions
// are, null where the library does not define it.
#define SONDE_REAL_FUNCTION(FIELD, SYMBOL) \
  decltype(&SYMBOL) FIELD = reinterpret_cast<decltype(&SYMBOL)>(::sonde::find_real_symbol(#SYMBOL))

#define SONDE_EXPAND(...) __VA_ARGS__
// ", args" after the cost model, or nothing for a function without parameters
// (cudaDeviceSynchronize).
#define SONDE_COMMA_ARGS(...) __VA_OPT__(, ) __VA_ARGS__
#define SONDE_EXPORT_C extern "C" __attribute__((visibility("default")))

// Expands one table entry into the interposed function. `ids` is the library's routine-id
// table, indexed by the entry's enumerator, filled when the library registers its routines.
#define SONDE_INTERCEPT(table, ids, nesting, NAME, RET, PARAMS, ARGS, MODEL) \
  SONDE_INTERCEPT_AS(table, nesting, NAME, RET, PARAMS, ARGS,                \
                     (::sonde::RoutineChoice{ids[size_t(Entry::NAME)]}), MODEL)

// The same, for an entry point some of whose calls are no work of the program's: where SKIP (an
// expression of the arguments) holds, the real function runs unmeasured. A LAPACK workspace
// query (lwork = -1) only says how much memory the routine needs, and numpy asks one before
// each call: counted, dsyevd_ read 80,000 calls for 40,000 eigh, each half as long (a red-team
// find).
#define SONDE_INTERCEPT_UNLESS(table, ids, nesting, NAME, RET, PARAMS, ARGS, SKIP, MODEL) \
  SONDE_EXPORT_C RET NAME PARAMS {                                                        \
    using Fn = RET(*) PARAMS;                                                             \
    auto& slot = table[size_t(Entry::NAME)];                                              \
    Fn real = reinterpret_cast<Fn>(slot.get(__builtin_return_address(0)));                \
    if (SKIP) return real ARGS;                                                           \
    return ::sonde::intercept<RET>(                                                       \
        real, ids[size_t(Entry::NAME)], nesting, __builtin_return_address(0),             \
        [&]() -> ::sonde::CallCost { return MODEL; } SONDE_COMMA_ARGS ARGS);              \
  }

// The same, for an entry point that stands for several routines (oneDNN's one execute function
// runs every primitive kind): CHOOSE, an expression of the arguments evaluated before the
// measurement starts, yields a value `call` with a member `id`; MODEL may read `call` too, so
// what CHOOSE looked up is not looked up twice.
#define SONDE_INTERCEPT_AS(table, nesting, NAME, RET, PARAMS, ARGS, CHOOSE, MODEL) \
  SONDE_EXPORT_C RET NAME PARAMS {                                                 \
    using Fn = RET(*) PARAMS;                                                      \
    auto& slot = table[size_t(Entry::NAME)];                                       \
    Fn real = reinterpret_cast<Fn>(slot.get(__builtin_return_address(0)));         \
    const auto call = CHOOSE;                                                      \
    return ::sonde::intercept<RET>(                                                \
        real, call.id, nesting, __builtin_return_address(0),                       \
        [&]() -> ::sonde::CallCost { return MODEL; } SONDE_COMMA_ARGS ARGS);       \
  }
