// Lookups that must not take the dynamic loader's lock.
//
// A signal's flush runs on the flusher thread while the thread the signal interrupted waits in
// sonde's handler, and that thread may hold the loader's lock: interrupted inside dlopen or
// dlclose (an import of a C extension, a pool's worker being ended with SIGTERM as it imports).
// Whatever the flush then asked of the loader (dladdr, dlsym, dlopen, dl_iterate_phdr) waited
// for that lock until the handler's bound ran out, and the process died without its profile:
// 3.5 s after a SIGTERM instead of 0.5 s, the process missing from the file (a red-team find,
// on every CPython 3.10-3.13). For that flush the lookups below answer without the loader
// (_dl_find_object, which takes no lock) or not at all.
#pragma once

namespace sonde {

// While one is alive on a thread, that thread's lookups leave the loader alone.
class LoaderFree {
 public:
  LoaderFree();
  ~LoaderFree();
  LoaderFree(const LoaderFree&) = delete;
  LoaderFree& operator=(const LoaderFree&) = delete;

 private:
  bool outer_;
};

// True on a thread holding a LoaderFree.
bool loader_free();

}  // namespace sonde
