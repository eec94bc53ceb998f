// Finding the real definition of an interposed function.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

namespace sonde {

// dlsym(RTLD_NEXT) first; when that finds nothing (the library was dlopen'ed RTLD_LOCAL, as
// Python does for numpy's and torch's extension modules and so for their libblas), every
// loaded object is asked in turn. Never returns sonde's own definition. nullptr if none.
void* find_real_symbol(const char* name);

// The definition of `name` that a call from `site` would have reached without sonde: the global
// scope's (`*global` true), else the one its own object's dependencies hold, else any loaded
// object's (find_real_symbol). [*lo, *lo + *span) is the calling object's mapped range (span 0
// where the site lies in no object). nullptr if none.
void* find_real_symbol_for(const char* name, const void* site, uintptr_t* lo, uintptr_t* span,
                           bool* global);

// The file of the loaded object that contains `address`, resolved to a real path; '' if none.
std::string object_path_of(const void* address);

// `name` as the loaded object containing `address` sees it (its own lookup scope: Debian's
// libblas.so.3 reaches libopenblas.so.0's symbols), so that another library of the same kind
// loaded beside it is never asked. nullptr if none.
void* symbol_beside(const void* address, const char* name);

[[noreturn]] void missing_real_symbol(const char* name);

// True when `address` lies in libsonde itself.
bool is_own_address(const void* address);

// One per interposed function: the real definition, looked up at its first call and cached.
// Lookup is idempotent, so two threads racing on the first call store the same pointer.
//
// A library's functions (get(site)) are the definition its caller would have bound to without
// sonde. Where the global scope holds one, that is every caller's. Where it holds none (each
// library opened RTLD_LOCAL, as Python opens extensions and so their BLAS), each calling object
// binds within its own dependencies, and two objects may bind to two libraries: a pip wheel of
// PyTorch to the MKL inside libtorch_cpu.so and numpy to its OpenBLAS, or two extensions to two
// CUDA runtimes. One definition for all sent the second library's calls to the first
// (tests/e2e/test_twin_libraries.py). `first` then serves the first calling object,
// [lo, lo + span), and each later one's is found in `others` (or looked up each call, past its
// size); `fn` is the global scope's alone.
struct RealSymbol {
  struct Caller {
    std::atomic<uintptr_t> lo{0}, span{0};
    std::atomic<void*> fn{nullptr};
  };
  // The calling objects after the first, made when the second comes (rare): one per wrapper
  // inline was 176 bytes more for each of the wrappers' symbols, 0.16 MiB of every process's
  // memory (memory.extra 5.14 -> 5.31 MiB).
  struct Others {
    static constexpr size_t kSize = 6;
    std::atomic<size_t> used{0};
    Caller at[kSize];
  };

  const char* name;
  std::atomic<void*> fn{nullptr};  // the global scope's: every caller's
  Caller first{};                  // where the global scope had none: the first calling object's
  std::atomic<Others*> others{nullptr};

  void* get() {
    void* f = fn.load(std::memory_order_acquire);
    if (__builtin_expect(f == nullptr, 0)) {
      f = find_real_symbol(name);
      if (f == nullptr) missing_real_symbol(name);  // the host called it: it must exist
      fn.store(f, std::memory_order_release);
    }
    return f;
  }
  void* get(const void* site) {
    void* f = fn.load(std::memory_order_acquire);
    if (__builtin_expect(f != nullptr, 1)) return f;
    f = first.fn.load(std::memory_order_acquire);
    if (__builtin_expect(f != nullptr && reinterpret_cast<uintptr_t>(site) -
                                                 first.lo.load(std::memory_order_relaxed) <
                                             first.span.load(std::memory_order_relaxed),
                         1))
      return f;
    return get_slow(site);
  }
  // The definition found first, for whom it was found.
  void* any() const {
    void* f = fn.load(std::memory_order_relaxed);
    return f != nullptr ? f : first.fn.load(std::memory_order_relaxed);
  }
  bool resolved() const { return any() != nullptr; }

 private:
  void* get_slow(const void* site);
};

}  // namespace sonde
