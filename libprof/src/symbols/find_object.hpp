// The loaded object an address lies in, as glibc 2.35's _dl_find_object answers it, on every
// glibc the wheel runs on (2.31 and later: docs/install.md, "What a wheel needs").
//
// _dl_find_object reads the loader's table of mapped ranges without its lock, so the sampler's
// signal handler and a flush that must leave the loader alone (loader_free.hpp) may ask it.
// Where the running glibc is older, the answer comes from dl_iterate_phdr, which takes the
// loader's lock: find_object then answers -1 on a loader-free thread, and find_object_lock_free
// always does.
#pragma once

#include <link.h>  // struct dl_find_object: glibc 2.35's headers, which a build needs

namespace sonde {

// 0 with *found filled (dlfo_flags 0, the object's mapped range, link map and
// PT_GNU_EH_FRAME), or -1 where no loaded object holds the address or the lookup cannot be made.
int find_object(const void* address, dl_find_object* found);

// The same, never taking a lock: -1 wherever glibc's own lock-free lookup is absent (< 2.35).
int find_object_lock_free(const void* address, dl_find_object* found);

// Whether glibc's own lookup is there (2.35 and later), so that lookups take no lock.
bool find_object_is_lock_free();

// The answer before 2.35, from dl_iterate_phdr (the loader's lock): what find_object gives there,
// public for its test, which holds it to glibc's own on the machines that have both.
int find_object_walking(const void* address, dl_find_object* found);

}  // namespace sonde
