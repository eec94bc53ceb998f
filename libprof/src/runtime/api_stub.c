/* Linked into programs that mark regions (libsonde_api.a). Each entry point looks up the
 * implementation in libsonde once, so a program built with regions runs unchanged, at the cost
 * of one pointer test per call, when sonde is not loaded. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdint.h>

#include "sonde/sonde.h"

typedef void (*RegionFn)(const char*);
typedef int (*IntFn)(void);

static void* resolve(_Atomic(void*)* slot, const char* impl_name) {
  static char absent; /* marks "looked up, not there" so the lookup happens once */
  void* fn = atomic_load_explicit(slot, memory_order_acquire);
  if (fn == 0) {
    fn = dlsym(RTLD_DEFAULT, impl_name);
    if (fn == 0) fn = &absent;
    atomic_store_explicit(slot, fn, memory_order_release);
  }
  return fn == &absent ? 0 : fn;
}

void sonde_region_begin(const char* name) {
  static _Atomic(void*) slot;
  RegionFn fn = (RegionFn)(uintptr_t)resolve(&slot, "sonde_impl_region_begin");
  if (fn) fn(name);
}

void sonde_region_end(const char* name) {
  static _Atomic(void*) slot;
  RegionFn fn = (RegionFn)(uintptr_t)resolve(&slot, "sonde_impl_region_end");
  if (fn) fn(name);
}

void sonde_region_bytes(const char* name, unsigned long long bytes) {
  typedef void (*BytesFn)(const char*, unsigned long long);
  static _Atomic(void*) slot;
  BytesFn fn = (BytesFn)(uintptr_t)resolve(&slot, "sonde_impl_region_bytes");
  if (fn) fn(name, bytes);
}

int sonde_flush(void) {
  static _Atomic(void*) slot;
  IntFn fn = (IntFn)(uintptr_t)resolve(&slot, "sonde_impl_flush");
  return fn ? fn() : -1;
}

int sonde_active(void) {
  static _Atomic(void*) slot;
  IntFn fn = (IntFn)(uintptr_t)resolve(&slot, "sonde_impl_active");
  return fn ? fn() : 0;
}
