#include "process/cfi_unwind.hpp"

#include <cstring>

namespace sonde {

namespace {

constexpr int kRbp = 6;
constexpr int kSavedReg[kCfiSaved] = {3, kRbp, 12, 13, 14, 15, kCfiRip};
constexpr uint32_t kCalleeSaved = (1u << 3) | (1u << kRbp) | (0xfu << 12);

uint64_t read_word(uintptr_t address) {
  uint64_t v;
  std::memcpy(&v, reinterpret_cast<const void*>(address), sizeof v);
  return v;
}

bool known(const CfiRegs& regs, int reg) { return reg < kCfiRegs && (regs.known >> reg) & 1; }

// A frame without unwind tables (JIT code, mostly): its caller found by the frame pointer when
// rbp looks like one (above rsp, not far), as libunwind guesses on x86-64.
CfiStep frame_pointer_step(CfiRegs& regs) {
  uint64_t sp = regs.r[kCfiRsp], fp = regs.r[kRbp];
  if (!known(regs, kRbp) || fp < sp || fp - sp > 0x4000 || (fp & 7) != 0) return CfiStep::kEnd;
  regs.r[kCfiRip] = read_word(fp + 8);
  regs.r[kRbp] = read_word(fp);
  regs.r[kCfiRsp] = fp + 16;
  regs.known = (1u << kCfiRip) | (1u << kRbp) | (1u << kCfiRsp);
  return regs.r[kCfiRip] == 0 ? CfiStep::kEnd : CfiStep::kStepped;
}

}  // namespace

void CfiCache::clear(uint64_t g) {
  for (uint32_t i = 0; i < kSlots; ++i) slots_[i].pc = 0;
  generation = g;
}

CfiStep cfi_step(CfiCache& cache, CfiRegs& regs, bool& exact) {
  if (!known(regs, kCfiRip) || !known(regs, kCfiRsp)) return CfiStep::kEnd;
  // A return address is just past its call, which may be a function's last instruction.
  uintptr_t pc = regs.r[kCfiRip] - (exact ? 0 : 1);
  CfiFrameRule& slot = cache.slot(pc);
  if (slot.pc != pc) {
    slot = cfi_rule_of(pc);
    CfiCache::bump(cache.misses);
  } else {
    CfiCache::bump(cache.hits);
  }
  const CfiFrameRule& rule = slot;
  if (rule.kind == CfiFrameRule::kNoTable) {
    exact = false;
    return frame_pointer_step(regs);
  }
  if (rule.kind != CfiFrameRule::kCfi || !known(regs, rule.cfa_reg)) return CfiStep::kUnsupported;
  uint64_t cfa = regs.r[rule.cfa_reg] + uint64_t(rule.cfa_off);
  if (rule.cfa_deref) cfa = read_word(cfa);
  CfiRegs caller;
  caller.known = 0;
  for (int i = 0; i < kCfiSaved; ++i) {
    const CfiRegRule& r = rule.saved[i];
    int reg = kSavedReg[i];
    uint64_t v = 0;
    switch (r.kind) {
      case CfiRegRule::kSame:
        if (!known(regs, reg)) continue;
        v = regs.r[reg];
        break;
      case CfiRegRule::kUndefined:
        if (reg == kCfiRip) return CfiStep::kEnd;  // the outermost frame (_start, a thread's start)
        continue;
      case CfiRegRule::kAtCfa:
        v = read_word(cfa + int64_t(r.off));
        break;
      case CfiRegRule::kValCfa:
        v = cfa + int64_t(r.off);
        break;
      case CfiRegRule::kAtReg:
        if (!known(regs, r.reg)) return CfiStep::kUnsupported;
        v = read_word(regs.r[r.reg] + int64_t(r.off));
        break;
      case CfiRegRule::kInReg:
        if (!known(regs, r.reg)) return CfiStep::kUnsupported;
        v = regs.r[r.reg];
        break;
      default:
        if (reg == kCfiRip) return CfiStep::kUnsupported;
        continue;  // a callee-saved register lost: only a frame that needs it hands over
    }
    caller.r[reg] = v;
    caller.known |= 1u << reg;
  }
  if (!known(caller, kCfiRip) || caller.r[kCfiRip] == 0) return CfiStep::kEnd;
  // The stack grows down: a caller's frame below its callee's is a misread one (except across
  // a signal frame, whose CFA is the interrupted stack's, perhaps another one).
  if (!rule.signal && cfa <= regs.r[kCfiRsp]) return CfiStep::kEnd;
  caller.r[kCfiRsp] = cfa;
  caller.known |= 1u << kCfiRsp;
  caller.known &= kCalleeSaved | (1u << kCfiRsp) | (1u << kCfiRip);
  regs = caller;
  exact = rule.signal;
  return CfiStep::kStepped;
}

}  // namespace sonde
