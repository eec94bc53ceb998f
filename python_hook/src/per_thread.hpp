// One object of T per thread, reached through an initial-exec pointer. _sonde is loaded with
// dlopen, so a thread_local of its own costs a __tls_get_addr call per access (two per Python
// call, about 4 ns of the frame hook's 60; 3.8 % of a --builtins run); an initial-exec variable
// is one instruction, but it takes static TLS from the spare room glibc keeps for dlopened
// modules (about 1.5 KB in a running python3, shared with libsonde's block, libgomp and
// others; core/per_thread.hpp): a pointer's 8 bytes, not the object.
#pragma once

#include "out_of_memory.hpp"

namespace sonde::python {

template <class T>
class PerThread {
 public:
  static T& get() {
    T* p = fast_;
    if (__builtin_expect(p == nullptr, 0)) {
      prepare_thread_for_exceptions();  // the thread's first hook call
      p = fast_ = &owner_.value;
    }
    return *p;
  }

 private:
  struct Owner {
    T value;
    ~Owner() { fast_ = nullptr; }
  };
  static inline thread_local T* fast_ __attribute__((tls_model("initial-exec"))) = nullptr;
  static inline thread_local Owner owner_;
};

}  // namespace sonde::python
