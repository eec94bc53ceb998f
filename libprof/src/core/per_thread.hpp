// Per-thread storage too big for libsonde's thread-local block. Its hot pointers are
// initial-exec, which puts the whole block into the static TLS area: preloaded, that area is
// sized for it at start-up; dlopen'ed into a running interpreter (python3 -m sonde
// --in-process) it must fit the ~1.5 KB glibc keeps spare, which libraries loaded later
// (libgomp) need too. So a thread_local of this type is a pointer, its storage is taken from
// the heap at the thread's first use and freed as the thread ends.
#pragma once

#include <memory>

namespace sonde {

template <class T>
class PerThread {
 public:
  T& get() {
    if (!storage_) storage_ = std::make_unique<T>();
    return *storage_;
  }

 private:
  std::unique_ptr<T> storage_;
};

}  // namespace sonde
