#include "symbols/rebind.hpp"

#include <dlfcn.h>
#include <errno.h>
#include <fmt/format.h>
#include <link.h>
#include <pthread.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>
#include <string_view>
#include <utility>

#include "symbols/dynamic_section.hpp"
#include "symbols/find_object.hpp"
#include "symbols/relro.hpp"

namespace sonde {

namespace {

#if defined(__x86_64__)
constexpr uint32_t kJumpSlot = R_X86_64_JUMP_SLOT;
constexpr uint32_t kGlobDat = R_X86_64_GLOB_DAT;
#elif defined(__aarch64__)
constexpr uint32_t kJumpSlot = R_AARCH64_JUMP_SLOT;
constexpr uint32_t kGlobDat = R_AARCH64_GLOB_DAT;
#else
#error "rebinding knows the GOT relocations of x86-64 and aarch64 only"
#endif

// One libc function libsonde defines: its name, libsonde's definition and the C library's.
struct Override {
  std::string name;
  void* ours;
  void* libc;
};

// An object seen by a pass, by its dynamic section (the loader's l_ld), and a `ret` in its code.
struct Seen {
  const ElfDyn* dynamic;
  uintptr_t start, end;
  const void* ret;
};

struct State {
  std::mutex mu;
  std::atomic<bool> on{false};
  bool gadgets = false;
  const ElfDyn* own = nullptr;
  const ElfDyn* ld_so = nullptr;
  std::vector<Override> table;  // sorted by name
  std::vector<void*> libc;      // the table's libc definitions, sorted
  std::vector<Seen> seen;       // sorted by dynamic
  unsigned long long adds = 0, subs = 0;
  int waiting = 0;  // objects seen mid-load, not yet relocated: looked at again next pass
};

State& state() {
  static State* s = new State;  // used until the process ends, exit handlers included
  return *s;
}

const ElfDyn* dynamic_containing(const void* address) {
  dl_find_object found{};
  if (find_object(address, &found) != 0) return nullptr;
  return found.dlfo_link_map != nullptr ? found.dlfo_link_map->l_ld : nullptr;
}

// The objects that make up the C library, where the functions libsonde wraps are defined (and
// whose own calls to them LD_PRELOAD never reaches either): never rebound.
bool c_library(const char* path) {
  const char* slash = path != nullptr ? std::strrchr(path, '/') : nullptr;
  std::string_view base = slash != nullptr ? slash + 1 : (path != nullptr ? path : "");
  for (std::string_view lib : {"libc.so", "libpthread.so", "libdl.so"}) {
    if (base.substr(0, lib.size()) == lib) return true;
  }
  return false;
}

// Shadow stacks (x86 CET) would take the `ret` handed to dlopen for a return-address attack.
bool shadow_stack_on() {
#if defined(__x86_64__)
  unsigned long features = 0;
  constexpr int kArchShstkStatus = 0x5005;
  return syscall(SYS_arch_prctl, kArchShstkStatus, &features) == 0 && (features & 1) != 0;
#else
  return true;  // the dlopen wrapper's return through the caller's code is x86-64 only
#endif
}

double now_ms() {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);
  return double(t.tv_sec) * 1e3 + double(t.tv_nsec) * 1e-6;
}

// ---- The table: libsonde's exports that the global scope resolves to the C library ----

struct Sections {
  DynamicSection own;
  std::vector<std::pair<const ElfDyn*, DynamicSection>> libc;
};

int collect_sections(dl_phdr_info* info, size_t, void* data) {
  auto* out = static_cast<Sections*>(data);
  const ElfDyn* dynamic = dynamic_of(*info);
  DynamicSection d;
  if (dynamic == state().own) {
    if (read_dynamic_section(*info, d) == nullptr) out->own = d;
  } else if (c_library(info->dlpi_name) && read_dynamic_section(*info, d) == nullptr) {
    out->libc.emplace_back(dynamic, d);
  }
  return 0;
}

void build_table(State& s) {
  Sections sections;
  dl_iterate_phdr(collect_sections, &sections);  // no dlsym inside: it holds the loader's lock
  const DynamicSection& own = sections.own;
  size_t count = own.symtab != nullptr ? own.symbol_count() : 0;
  for (size_t i = 1; i < count && i < own.symtab_room; ++i) {
    const ElfSym& sym = own.symtab[i];
    const char* name = own.name_of(sym);
    if (sym.st_shndx == SHN_UNDEF || ELF64_ST_TYPE(sym.st_info) != STT_FUNC ||
        ELF64_ST_BIND(sym.st_info) == STB_LOCAL ||
        ELF64_ST_VISIBILITY(sym.st_other) != STV_DEFAULT || name == nullptr || name[0] == '\0') {
      continue;
    }
    bool in_libc = std::any_of(sections.libc.begin(), sections.libc.end(), [&](const auto& lib) {
      return lib.second.defined(name) != nullptr;
    });
    if (!in_libc) continue;
    // What the global scope binds the name to: the C library's, unless the program put
    // another definition ahead of it (then that one stays, as it would under LD_PRELOAD).
    void* global = dlsym(RTLD_DEFAULT, name);
    const ElfDyn* where = global != nullptr ? dynamic_containing(global) : nullptr;
    bool libc = std::any_of(sections.libc.begin(), sections.libc.end(),
                            [&](const auto& lib) { return lib.first == where; });
    if (libc)
      s.table.push_back(Override{name, reinterpret_cast<void*>(own.base + sym.st_value), global});
  }
  std::sort(s.table.begin(), s.table.end(),
            [](const Override& a, const Override& b) { return a.name < b.name; });
  for (const Override& o : s.table) s.libc.push_back(o.libc);
  std::sort(s.libc.begin(), s.libc.end());
}

const Override* override_for(const State& s, const char* name) {
  auto it = std::lower_bound(s.table.begin(), s.table.end(), name,
                             [](const Override& o, const char* n) { return o.name < n; });
  return it != s.table.end() && it->name == name ? &*it : nullptr;
}

// ---- One object ----

struct Pass {
  State& s;
  int waited;  // objects the last pass found mid-load
  RebindPass out;
  bool first = true;
  bool stop_early = false;     // nothing loaded or unloaded since the last pass
  ReadOnlyMappings read_only;  // before glibc 2.35: read once a pass, where first asked
};

// The slots of `relocations` (`count` of them) naming a function of the table, with the value
// they get; GLOB_DAT and JUMP_SLOT only (a relative relocation names no symbol). A slot's value
// is read first: only one bound to a libc definition of the table's, or not bound yet (lazy
// binding: still the object's own PLT), has its symbol's name looked up. The loader has written
// every one of these slots as it relocated the object, so each can be read.
void find_slots(const Pass& p, const DynamicSection& d, std::pair<uintptr_t, uintptr_t> span,
                const ElfRela* relocations, size_t count,
                std::vector<std::pair<void**, void*>>& out) {
  auto in_object = [&](const void* a) {
    return uintptr_t(a) >= span.first && uintptr_t(a) < span.second;
  };
  for (size_t i = 0; i < count; ++i) {
    const ElfRela& r = relocations[i];
    uint32_t type = ELF64_R_TYPE(r.r_info);
    if (type != kJumpSlot && type != kGlobDat) continue;
    auto slot = reinterpret_cast<void**>(d.base + r.r_offset);
    if (!in_object(slot)) continue;
    void* now = __atomic_load_n(slot, __ATOMIC_RELAXED);
    bool lazy = type == kJumpSlot && in_object(now);
    if (!lazy && !std::binary_search(p.s.libc.begin(), p.s.libc.end(), now)) continue;
    size_t index = ELF64_R_SYM(r.r_info);
    if (index == 0 || index >= d.symtab_room) continue;
    const ElfSym& sym = d.symtab[index];
    if (sym.st_shndx != SHN_UNDEF) continue;  // the object's own definition
    const char* name = d.name_of(sym);
    const Override* o = name != nullptr ? override_for(p.s, name) : nullptr;
    // By name: glibc's _Exit is its _exit, and each has its own wrapper.
    if (o != nullptr && (lazy || now == o->libc)) out.emplace_back(slot, o->ours);
  }
}

// Writes the slots; RELRO pages are made writable for it and read-only again after. Returns
// why not, or nullptr.
const char* write_slots(const DynamicSection& d, std::vector<std::pair<void**, void*>>& slots) {
  auto [start, end] = relro_of(d);
  auto protected_slot = [&](void** slot) {
    return uintptr_t(slot) >= start && uintptr_t(slot) < end;
  };
  bool relro = std::any_of(slots.begin(), slots.end(),
                           [&](const auto& w) { return protected_slot(w.first); });
  const char* why = nullptr;
  if (relro && mprotect(reinterpret_cast<void*>(start), end - start, PROT_READ | PROT_WRITE) != 0) {
    why = "its read-only GOT could not be made writable (mprotect)";
    relro = false;
    slots.erase(std::remove_if(slots.begin(), slots.end(),
                               [&](const auto& w) { return protected_slot(w.first); }),
                slots.end());
  }
  for (auto [slot, value] : slots) __atomic_store_n(slot, value, __ATOMIC_RELAXED);
  if (relro) mprotect(reinterpret_cast<void*>(start), end - start, PROT_READ);
  return why;
}

// A `ret` in the object's code (return_gadget says what for); the first of its first
// executable segment, a few bytes in.
const void* ret_in(const DynamicSection& d) {
  for (int i = 0; i < d.phnum; ++i) {
    const ElfPhdr& ph = d.phdr[i];
    if (ph.p_type != PT_LOAD || (ph.p_flags & PF_X) == 0 || (ph.p_flags & PF_R) == 0) continue;
    size_t bytes = std::min<size_t>(ph.p_filesz, size_t{1} << 20);
    if (const void* at =
            std::memchr(reinterpret_cast<const void*>(d.base + ph.p_vaddr), 0xc3, bytes))
      return at;
  }
  return nullptr;
}

std::pair<uintptr_t, uintptr_t> span_of(const DynamicSection& d) {
  uintptr_t lo = UINTPTR_MAX, hi = 0;
  for (int i = 0; i < d.phnum; ++i) {
    if (d.phdr[i].p_type != PT_LOAD) continue;
    lo = std::min<uintptr_t>(lo, d.base + d.phdr[i].p_vaddr);
    hi = std::max<uintptr_t>(hi, d.base + d.phdr[i].p_vaddr + d.phdr[i].p_memsz);
  }
  return {lo, hi};
}

std::string shown_name(const dl_phdr_info& info) {
  return info.dlpi_name != nullptr && info.dlpi_name[0] != '\0' ? info.dlpi_name
                                                                : "the main program";
}

bool relocated(Pass& p, const DynamicSection& d, const ElfDyn* dynamic) {
  auto [lo, hi] = span_of(d);
  if (lo >= hi) return false;
  if (find_object_is_lock_free())
    return dynamic_containing(reinterpret_cast<const void*>(lo)) == dynamic;
  auto [start, end] = relro_of(d);
  return start < end && p.read_only.hold(start);
}

// Called by dl_iterate_phdr with the loader's lock held, so no object it reports can be
// unloaded meanwhile; no dl* call in here (the lock order would deadlock against a dlopen).
int rebind_one(dl_phdr_info* info, size_t, void* data) {
  auto& p = *static_cast<Pass*>(data);
  State& s = p.s;
  if (p.first) {  // the counters are the same for every object of one call
    p.first = false;
    if (s.adds == info->dlpi_adds && s.subs == info->dlpi_subs && p.waited == 0) {
      p.stop_early = true;
      return 1;
    }
    if (s.subs != info->dlpi_subs) s.seen.clear();  // unloaded: another may be where it was
    s.adds = info->dlpi_adds;
    s.subs = info->dlpi_subs;
  }
  const ElfDyn* dynamic = dynamic_of(*info);
  if (dynamic == nullptr || dynamic == s.own || dynamic == s.ld_so || c_library(info->dlpi_name))
    return 0;
  auto at = std::lower_bound(s.seen.begin(), s.seen.end(), dynamic,
                             [](const Seen& a, const ElfDyn* b) { return a.dynamic < b; });
  if (at != s.seen.end() && at->dynamic == dynamic) return 0;
  DynamicSection d;
  const char* why = read_dynamic_section(*info, d);
  if (why == nullptr && (d.rela != nullptr || d.jmprel != nullptr)) {
    auto [lo, hi] = span_of(d);
    if (!relocated(p, d, dynamic)) {
      ++p.s.waiting;
      return 0;
    }
    std::vector<std::pair<void**, void*>> slots;
    find_slots(p, d, {lo, hi}, d.jmprel, d.jmprel_count, slots);
    find_slots(p, d, {lo, hi}, d.rela + d.relative_count, d.rela_count - d.relative_count, slots);
    why = write_slots(d, slots);
    p.out.slots += int(slots.size());
  }
  if (why != nullptr) p.out.skipped.push_back(shown_name(*info) + ": " + why);
  ++p.out.objects;
  auto [lo, hi] = span_of(d);
  s.seen.insert(at, Seen{dynamic, lo, hi, why == nullptr ? ret_in(d) : nullptr});
  return 0;
}

RebindPass run_pass(State& s) {
  double from = now_ms();
  Pass p{s, s.waiting, {}};
  s.waiting = 0;
  dl_iterate_phdr(rebind_one, &p);
  if (p.stop_early) s.waiting = p.waited;
  p.out.ms = now_ms() - from;
  return p.out;
}

void lock_for_fork() { state().mu.lock(); }
void unlock_after_fork() { state().mu.unlock(); }

}  // namespace

RebindPass rebind_loaded_objects() {
  State& s = state();
  std::lock_guard lock(s.mu);
  if (!s.on.load(std::memory_order_relaxed)) {
    s.own = dynamic_containing(reinterpret_cast<const void*>(&rebind_loaded_objects));
    s.ld_so = dynamic_containing(reinterpret_cast<const void*>(getauxval(AT_BASE)));
    build_table(s);
    s.gadgets = !shadow_stack_on();
    s.adds = s.subs = ~0ull;
    // A fork while another thread is in a pass would leave the child's lock held.
    pthread_atfork(lock_for_fork, unlock_after_fork, unlock_after_fork);
    s.on.store(true, std::memory_order_release);
  }
  return run_pass(s);
}

RebindPass rebind_new_objects() {
  State& s = state();
  if (!s.on.load(std::memory_order_acquire)) return {};
  std::lock_guard lock(s.mu);
  return run_pass(s);
}

bool rebinding() { return state().on.load(std::memory_order_acquire); }

std::vector<std::string> rebound_functions() {
  State& s = state();
  std::lock_guard lock(s.mu);
  std::vector<std::string> names;
  for (const Override& o : s.table) names.push_back(o.name);
  return names;
}

const void* return_gadget(const void* caller) {
  State& s = state();
  if (!s.on.load(std::memory_order_acquire) || !s.gadgets) return nullptr;
  std::lock_guard lock(s.mu);
  auto at = uintptr_t(caller);
  for (const Seen& seen : s.seen) {
    if (at >= seen.start && at < seen.end) return seen.ret;
  }
  return nullptr;
}

std::string rebind_summary(const RebindPass& pass) {
  return fmt::format("rebound {} GOT slots in {} objects in {:.2f} ms ({} refused)", pass.slots,
                     pass.objects, pass.ms, pass.skipped.size());
}

std::string rebind_note(const RebindPass& pass) {
  std::string note;
  for (const std::string& object : pass.skipped) {
    note += fmt::format("{}{}", note.empty() ? "" : "; ", object);
  }
  if (!note.empty()) {
    note =
        "loaded in-process, sonde could not point these objects' calls into libc at its "
        "wrappers (exec, _exit, sigaction, pthread_create, dlopen... from them are not seen): " +
        note;
  }
  return note;
}

}  // namespace sonde
