// Rebinding for an in-process sonde (python3 -m sonde --in-process): libsonde loaded after libc
// is behind it in the global scope, so every reference to a libc function that libsonde also
// defines (its exec, _exit, sigaction, pthread_create, dlopen wrappers) was bound, or will be
// bound, to libc's. This points those GOT slots at libsonde's definitions instead, in every
// loaded object but ld.so, the C library and libsonde itself: what LD_PRELOAD would have bound.
//
// Which functions: the ones libsonde exports that the global scope resolves to the C library
// (read from libsonde's own dynamic symbol table, so a wrapper added later is covered without a
// list to keep). Which slots: R_X86_64_JUMP_SLOT and R_X86_64_GLOB_DAT relocations (aarch64's
// JUMP_SLOT and GLOB_DAT too, untested) of an undefined symbol of that name whose slot holds the
// C library's definition or, not yet bound, the object's own PLT. A slot bound to another
// definition (an older symbol version of libc's, a library of the program's own) stays.
#pragma once

#include <string>
#include <vector>

namespace sonde {

// What one pass did, for the run's note on what could not be rebound.
struct RebindPass {
  int objects = 0;                   // objects rebound for the first time
  int slots = 0;                     // GOT slots pointed at libsonde's definitions
  std::vector<std::string> skipped;  // "object: why" for each object refused
  double ms = 0;
};

// Turns rebinding on and rebinds every object loaded now. Once; later calls do what
// rebind_new_objects does.
RebindPass rebind_loaded_objects();

// Rebinds the objects loaded since the last pass (a dlopen returned); nothing while rebinding is
// off. Each object is rebound once, after the loader has relocated it.
RebindPass rebind_new_objects();

bool rebinding();

// The functions rebound, by name (libsonde's exports the global scope resolves to libc).
std::vector<std::string> rebound_functions();

// An address in the object that contains `caller` holding a `ret` instruction (0xc3), or
// nullptr (the object is not known, or shadow stacks are on, which would take the return for
// an attack). glibc's dlopen takes its caller from its return address, for the namespace, the
// RUNPATH and $ORIGIN: sonde's dlopen wrapper hands it this address as the return address, so
// that glibc sees the caller's object, and the `ret` there returns into sonde, which rebinds
// what was loaded before it returns to the caller (wrappers/process/process_wrappers.cpp).
const void* return_gadget(const void* caller);

// The pass in one line for the log, and the note (empty when nothing was left unrebound).
std::string rebind_summary(const RebindPass& pass);
std::string rebind_note(const RebindPass& pass);

}  // namespace sonde
