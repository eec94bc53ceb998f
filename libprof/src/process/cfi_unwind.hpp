// The sampler's unwinder (x86-64): each frame's caller is found from the frame's .eh_frame CFI,
// and the rule read there (where the caller's CFA, return address and callee-saved registers
// are) is kept in a per-thread cache by address. libunwind, before, spent ~180 us a sample on
// PyTorch's stacks (a signal mask and a dl_iterate_phdr per frame its 128-entry cache missed),
// libgcc ~50 us (no cache: a cold binary search of libtorch_cpu's 1.7 MB .eh_frame_hdr per
// frame); with the cache a frame seen before costs a few loads. No lock, no allocation, no
// system call: it runs in the sampler's signal handler.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

namespace sonde {

// DWARF register numbers of x86-64 (System V psABI): 7 is rsp, 16 the return address column.
constexpr int kCfiRegs = 17;
constexpr int kCfiRsp = 7;
constexpr int kCfiRip = 16;

struct CfiRegs {
  uint64_t r[kCfiRegs];
  uint32_t known;  // a bit per register: caller-saved ones are unknown past the first frame
};

// Where one register of the caller is, as the frame's CFI says.
struct CfiRegRule {
  int32_t off;
  uint8_t kind;  // CfiRegRule::Kind
  uint8_t reg;   // kAtReg, kInReg: the register it is relative to, or held in
  enum Kind : uint8_t { kSame, kUndefined, kUnknown, kAtCfa, kValCfa, kAtReg, kInReg };
};

// The rule of one address: the callee-saved registers rbx, rbp, r12-r15 and the return address.
constexpr int kCfiSaved = 7;
struct CfiFrameRule {
  uintptr_t pc = 0;  // the cache's key (0: an empty slot)
  int64_t cfa_off = 0;
  uint8_t kind = 0;  // CfiFrameRule::Kind
  uint8_t cfa_reg = 0;
  bool cfa_deref = false;  // CFA = *(reg + off): a realigned stack's frame, a signal frame
  bool signal = false;     // the caller's address is not a return address (CIE augmentation S)
  CfiRegRule saved[kCfiSaved];
  enum Kind : uint8_t { kCfi, kNoTable, kUnsupported };
};

// Direct-mapped, by address; one per sampled thread, filled only by that thread's handler.
class CfiCache {
 public:
  static constexpr uint32_t kSlots = 2048;
  CfiCache() : slots_(new CfiFrameRule[kSlots]) {}
  CfiFrameRule& slot(uintptr_t pc) { return slots_[(pc * 0x9E3779B97F4A7C15ULL) >> (64 - 11)]; }
  void clear(uint64_t generation);
  uint64_t generation = 0;  // the objects-unloaded count it was filled under
  // Written by the owner's handler only (a plain load and store), read at the exit flush.
  std::atomic<uint64_t> hits{0}, misses{0};
  static void bump(std::atomic<uint64_t>& n) {
    n.store(n.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  }

 private:
  std::unique_ptr<CfiFrameRule[]> slots_;
};
static_assert(CfiCache::kSlots == 1u << 11);

enum class CfiStep {
  kStepped,      // regs are now the caller's
  kEnd,          // the outermost frame, or a stack that goes nowhere
  kUnsupported,  // this frame's CFI says what this walker cannot do: another unwinder's turn
};

// One frame outwards. `exact` says regs' address is the instruction itself (the interrupted
// one, or a signal frame's caller), not a return address just past a call; it is updated.
CfiStep cfi_step(CfiCache& cache, CfiRegs& regs, bool& exact);

// The rule of `pc` read from its object's tables (the cache's miss path; public for tests).
CfiFrameRule cfi_rule_of(uintptr_t pc);

}  // namespace sonde
