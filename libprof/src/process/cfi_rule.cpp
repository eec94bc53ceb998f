// The miss path of the sampler's unwinder: the rule of one address, from the .eh_frame_hdr
// table its object's PT_GNU_EH_FRAME points at (found with _dl_find_object, lock-free and
// async-signal-safe: find_object.hpp), the FDE and CIE there, and their CFA program run up to the
// address. What this reads is the loaded objects' own tables; a read that faults is caught by the
// sampler's guard. Anything outside the subset compilers emit for x86-64 code makes the rule
// kUnsupported, and the sampler hands that frame to libunwind.
#include <dlfcn.h>

#include <cstring>

#include "process/cfi_unwind.hpp"
#include "symbols/find_object.hpp"

namespace sonde {

namespace {

template <class T>
T load(const uint8_t*& p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  p += sizeof v;
  return v;
}

uint64_t uleb(const uint8_t*& p) {
  uint64_t v = 0;
  for (unsigned shift = 0;; shift += 7) {
    uint8_t b = *p++;
    if (shift < 64) v |= uint64_t(b & 0x7f) << shift;
    if ((b & 0x80) == 0) return v;
  }
}

int64_t sleb(const uint8_t*& p) {
  int64_t v = 0;
  unsigned shift = 0;
  uint8_t b;
  do {
    b = *p++;
    if (shift < 64) v |= int64_t(b & 0x7f) << shift;
    shift += 7;
  } while (b & 0x80);
  if (shift < 64 && (b & 0x40)) v |= -(int64_t(1) << shift);
  return v;
}

constexpr uint8_t kOmit = 0xff;

// A DW_EH_PE-encoded pointer: absolute, pc-relative, or relative to `datarel` (the hdr).
bool encoded(const uint8_t*& p, uint8_t enc, uintptr_t datarel, uintptr_t& out) {
  if (enc == kOmit) {
    out = 0;
    return true;
  }
  const uint8_t* field = p;
  switch (enc & 0x0f) {
    case 0x00:
    case 0x04:
      out = load<uint64_t>(p);
      break;
    case 0x01:
      out = uleb(p);
      break;
    case 0x02:
      out = load<uint16_t>(p);
      break;
    case 0x03:
      out = load<uint32_t>(p);
      break;
    case 0x09:
      out = uintptr_t(sleb(p));
      break;
    case 0x0a:
      out = uintptr_t(int64_t(load<int16_t>(p)));
      break;
    case 0x0b:
      out = uintptr_t(int64_t(load<int32_t>(p)));
      break;
    case 0x0c:
      out = uintptr_t(load<int64_t>(p));
      break;
    default:
      return false;
  }
  switch (enc & 0x70) {
    case 0x00:
      break;
    case 0x10:
      out += reinterpret_cast<uintptr_t>(field);
      break;
    case 0x30:
      if (datarel == 0) return false;
      out += datarel;
      break;
    default:
      return false;
  }
  return true;  // DW_EH_PE_indirect only ever marks a personality routine, never read here
}

struct Cie {
  uint64_t code_align = 1;
  int64_t data_align = -8;
  uint8_t fde_enc = 0;
  bool z = false;
  bool signal = false;
  const uint8_t* program = nullptr;
  const uint8_t* end = nullptr;
};

// A length field: 32 bits, or 0xffffffff and 64 (the 64-bit DWARF format). {nullptr} on 0.
const uint8_t* entry_end(const uint8_t*& p, bool& wide) {
  uint64_t len = load<uint32_t>(p);
  wide = len == 0xffffffffu;
  if (wide) len = load<uint64_t>(p);
  return len == 0 ? nullptr : p + len;
}

bool parse_cie(const uint8_t* p, Cie& cie) {
  bool wide;
  const uint8_t* end = entry_end(p, wide);
  if (end == nullptr) return false;
  if ((wide ? load<uint64_t>(p) : load<uint32_t>(p)) != 0) return false;  // a CIE's id is 0
  uint8_t version = *p++;
  if (version != 1 && version != 3) return false;
  const char* aug = reinterpret_cast<const char*>(p);
  p += std::strlen(aug) + 1;
  cie.code_align = uleb(p);
  cie.data_align = sleb(p);
  uint64_t ra = version == 1 ? *p++ : uleb(p);
  if (ra != kCfiRip) return false;
  if (aug[0] == 'z') {
    cie.z = true;
    uint64_t len = uleb(p);
    const uint8_t* data_end = p + len;
    for (const char* c = aug + 1; *c != '\0'; ++c) {
      if (*c == 'R') {
        cie.fde_enc = *p++;
      } else if (*c == 'L') {
        ++p;
      } else if (*c == 'P') {
        uintptr_t ignored;
        if (!encoded(p, uint8_t(*p++ & 0x7f), 0, ignored)) break;
      } else if (*c == 'S') {
        cie.signal = true;
      } else {
        break;  // the rest of the data is skipped by its length
      }
    }
    p = data_end;
  } else if (aug[0] != '\0') {
    return false;
  }
  cie.program = p;
  cie.end = end;
  return true;
}

// The register rules a CFA program builds, the ones the walk follows (rbx, rbp, r12-r15, rip).
struct State {
  int64_t cfa_off = 0;
  uint8_t cfa_reg = kCfiRsp;
  bool cfa_deref = false;
  bool cfa_ok = true;
  CfiRegRule saved[kCfiSaved] = {};
};

int saved_index(uint64_t reg) {
  switch (reg) {
    case 3:
      return 0;  // rbx
    case 6:
      return 1;  // rbp
    case 12:
    case 13:
    case 14:
    case 15:
      return int(reg) - 10;
    case kCfiRip:
      return 6;
    default:
      return -1;
  }
}

// An expression block of the one shape compilers give x86-64 frames: DW_OP_bregN off, then
// DW_OP_deref or not (a realigned stack's CFA, a signal frame's saved registers).
bool breg_expression(const uint8_t*& p, uint8_t& reg, int64_t& off, bool& deref) {
  uint64_t len = uleb(p);
  const uint8_t* end = p + len;
  bool ok = false;
  if (len >= 2 && *p >= 0x70 && *p <= 0x70 + 16) {
    reg = uint8_t(*p++ - 0x70);
    off = sleb(p);
    deref = p < end && *p == 0x06;
    if (deref) ++p;
    ok = p == end;
  }
  p = end;
  return ok;
}

// A PLT entry's CFA (the linker's fixed expression): rsp + 8, plus 8 past the entry's push,
// which is at byte 11 (10 in an IBT PLT) of its 16: evaluated here for the one address.
bool plt_expression(const uint8_t* p, uintptr_t pc, int64_t& off) {
  static constexpr uint8_t kHead[] = {11, 0x77, 0x08, 0x80, 0x00, 0x3f, 0x1a};
  static constexpr uint8_t kTail[] = {0x2a, 0x33, 0x24, 0x22};
  if (std::memcmp(p, kHead, sizeof kHead) != 0 || p[7] < 0x30 || p[7] > 0x4f ||
      std::memcmp(p + 8, kTail, sizeof kTail) != 0) {
    return false;
  }
  off = 8 + ((pc & 15) >= uintptr_t(p[7] - 0x30) ? 8 : 0);
  return true;
}

void set(State& s, uint64_t reg, CfiRegRule rule) {
  int i = saved_index(reg);
  if (i >= 0) s.saved[i] = rule;
}

// Runs [p, end) from `loc` until the address passes `target`; false on an operation outside
// the subset (the caller's rule is then unknown).
bool run_program(const uint8_t* p, const uint8_t* end, const Cie& cie, uintptr_t loc,
                 uintptr_t target, State& s, const State& initial) {
  constexpr int kDepth = 8;
  State remembered[kDepth];
  int depth = 0;
  auto at_cfa = [](int64_t off) {
    return CfiRegRule{int32_t(off), off == int32_t(off) ? CfiRegRule::kAtCfa : CfiRegRule::kUnknown,
                      0};
  };
  while (p < end) {
    uint8_t op = *p++;
    uint8_t low = op & 0x3f;
    if ((op & 0xc0) == 0x40) {  // DW_CFA_advance_loc
      loc += low * cie.code_align;
      if (loc > target) return true;
      continue;
    }
    if ((op & 0xc0) == 0x80) {  // DW_CFA_offset
      set(s, low, at_cfa(int64_t(uleb(p)) * cie.data_align));
      continue;
    }
    if ((op & 0xc0) == 0xc0) {  // DW_CFA_restore
      int i = saved_index(low);
      if (i >= 0) s.saved[i] = initial.saved[i];
      continue;
    }
    uint64_t reg, off;
    uintptr_t address;
    switch (op) {
      case 0x00:
        break;    // nop
      case 0x01:  // set_loc
        if (!encoded(p, cie.fde_enc, 0, address)) return false;
        loc = address;
        if (loc > target) return true;
        break;
      case 0x02:
        loc += load<uint8_t>(p) * cie.code_align;
        if (loc > target) return true;
        break;
      case 0x03:
        loc += load<uint16_t>(p) * cie.code_align;
        if (loc > target) return true;
        break;
      case 0x04:
        loc += load<uint32_t>(p) * cie.code_align;
        if (loc > target) return true;
        break;
      case 0x05:  // offset_extended
        reg = uleb(p);
        set(s, reg, at_cfa(int64_t(uleb(p)) * cie.data_align));
        break;
      case 0x06: {  // restore_extended
        int i = saved_index(uleb(p));
        if (i >= 0) s.saved[i] = initial.saved[i];
        break;
      }
      case 0x07:
        set(s, uleb(p), CfiRegRule{0, CfiRegRule::kUndefined, 0});
        break;
      case 0x08:
        set(s, uleb(p), CfiRegRule{0, CfiRegRule::kSame, 0});
        break;
      case 0x09:  // register: held in another register
        reg = uleb(p);
        off = uleb(p);
        set(s, reg,
            off < kCfiRegs ? CfiRegRule{0, CfiRegRule::kInReg, uint8_t(off)}
                           : CfiRegRule{0, CfiRegRule::kUnknown, 0});
        break;
      case 0x0a:
        if (depth == kDepth) return false;
        remembered[depth++] = s;
        break;
      case 0x0b: {
        if (depth == 0) return false;
        // The CFA is part of the remembered row, as libgcc keeps it.
        s = remembered[--depth];
        break;
      }
      case 0x0c:  // def_cfa
        reg = uleb(p);
        s.cfa_off = int64_t(uleb(p));
        s.cfa_reg = uint8_t(reg);
        s.cfa_ok = reg < kCfiRegs;
        s.cfa_deref = false;
        break;
      case 0x0d:
        reg = uleb(p);
        s.cfa_reg = uint8_t(reg);
        s.cfa_ok = reg < kCfiRegs && !s.cfa_deref;
        break;
      case 0x0e:
        s.cfa_off = int64_t(uleb(p));
        break;
      case 0x0f: {  // def_cfa_expression
        uint8_t r;
        int64_t o;
        bool deref;
        if (plt_expression(p, target, o)) {
          p += 1 + p[0];
          s.cfa_ok = true;
          s.cfa_reg = kCfiRsp;
          s.cfa_off = o;
          s.cfa_deref = false;
          break;
        }
        s.cfa_ok = breg_expression(p, r, o, deref);
        s.cfa_reg = r;
        s.cfa_off = o;
        s.cfa_deref = deref;
        break;
      }
      case 0x10: {  // expression: the register is saved at the address the block computes
        reg = uleb(p);
        uint8_t r;
        int64_t o;
        bool deref;
        bool ok = breg_expression(p, r, o, deref) && !deref && o == int32_t(o);
        set(s, reg,
            ok ? CfiRegRule{int32_t(o), CfiRegRule::kAtReg, r}
               : CfiRegRule{0, CfiRegRule::kUnknown, 0});
        break;
      }
      case 0x11:  // offset_extended_sf
        reg = uleb(p);
        set(s, reg, at_cfa(sleb(p) * cie.data_align));
        break;
      case 0x12:  // def_cfa_sf
        reg = uleb(p);
        s.cfa_off = sleb(p) * cie.data_align;
        s.cfa_reg = uint8_t(reg);
        s.cfa_ok = reg < kCfiRegs;
        s.cfa_deref = false;
        break;
      case 0x13:
        s.cfa_off = sleb(p) * cie.data_align;
        break;
      case 0x14:
      case 0x15: {  // val_offset(_sf): the value is CFA + offset
        reg = uleb(p);
        int64_t o = (op == 0x14 ? int64_t(uleb(p)) : sleb(p)) * cie.data_align;
        set(s, reg,
            o == int32_t(o) ? CfiRegRule{int32_t(o), CfiRegRule::kValCfa, 0}
                            : CfiRegRule{0, CfiRegRule::kUnknown, 0});
        break;
      }
      case 0x16: {  // val_expression
        reg = uleb(p);
        uint64_t len = uleb(p);
        p += len;
        set(s, reg, CfiRegRule{0, CfiRegRule::kUnknown, 0});
        break;
      }
      case 0x2e:
        uleb(p);
        break;    // GNU_args_size
      case 0x2f:  // GNU_negative_offset_extended
        reg = uleb(p);
        set(s, reg, at_cfa(-int64_t(uleb(p)) * cie.data_align));
        break;
      default:
        return false;
    }
  }
  return true;
}

// The FDE covering `pc` in its object's sorted table, or nullptr.
const uint8_t* find_fde(uintptr_t pc, const uint8_t* hdr) {
  if (hdr[0] != 1) return nullptr;
  uint8_t frame_enc = hdr[1], count_enc = hdr[2], table_enc = hdr[3];
  const uint8_t* p = hdr + 4;
  auto base = reinterpret_cast<uintptr_t>(hdr);
  uintptr_t eh_frame, count;
  // datarel|sdata4 is what every linker writes; anything else has no table to search.
  if (!encoded(p, frame_enc, base, eh_frame) || !encoded(p, count_enc, base, count) ||
      table_enc != 0x3b || count == 0) {
    return nullptr;
  }
  const auto* table = reinterpret_cast<const int32_t*>(p);
  size_t lo = 0, hi = count;  // the last entry whose start is <= pc
  while (hi - lo > 1) {
    size_t mid = lo + (hi - lo) / 2;
    if (base + intptr_t(table[2 * mid]) <= pc)
      lo = mid;
    else
      hi = mid;
  }
  if (base + intptr_t(table[2 * lo]) > pc) return nullptr;
  return hdr + table[2 * lo + 1];
}

}  // namespace

CfiFrameRule cfi_rule_of(uintptr_t pc) {
  CfiFrameRule rule;
  rule.pc = pc;
  rule.kind = CfiFrameRule::kNoTable;
  // Before glibc 2.35 no lookup is safe in a signal handler: libunwind walks the frame.
  if (!find_object_is_lock_free()) {
    rule.kind = CfiFrameRule::kUnsupported;
    return rule;
  }
  dl_find_object object;
  if (find_object_lock_free(reinterpret_cast<void*>(pc), &object) != 0 ||
      object.dlfo_eh_frame == nullptr) {
    return rule;  // no object (JIT code), or one without unwind tables
  }
  const uint8_t* fde = find_fde(pc, static_cast<const uint8_t*>(object.dlfo_eh_frame));
  if (fde == nullptr) return rule;
  const uint8_t* p = fde;
  bool wide;
  const uint8_t* end = entry_end(p, wide);
  if (end == nullptr) return rule;
  const uint8_t* id_field = p;
  uint64_t cie_off = wide ? load<uint64_t>(p) : load<uint32_t>(p);
  Cie cie;
  rule.kind = CfiFrameRule::kUnsupported;
  if (cie_off == 0 || !parse_cie(id_field - cie_off, cie)) return rule;
  uintptr_t start, range;
  if (!encoded(p, cie.fde_enc, 0, start) || !encoded(p, cie.fde_enc & 0x0f, 0, range)) {
    return rule;
  }
  if (pc < start || pc - start >= range) {
    rule.kind = CfiFrameRule::kNoTable;  // between two functions' FDEs
    return rule;
  }
  if (cie.z) p += uleb(p);
  State initial;
  for (CfiRegRule& r : initial.saved) r = CfiRegRule{0, CfiRegRule::kSame, 0};
  if (!run_program(cie.program, cie.end, cie, 0, UINTPTR_MAX, initial, initial)) return rule;
  State s = initial;
  if (!run_program(p, end, cie, start, pc, s, initial) || !s.cfa_ok) return rule;
  rule.kind = CfiFrameRule::kCfi;
  rule.cfa_reg = s.cfa_reg;
  rule.cfa_off = s.cfa_off;
  rule.cfa_deref = s.cfa_deref;
  rule.signal = cie.signal;
  for (int i = 0; i < kCfiSaved; ++i) rule.saved[i] = s.saved[i];
  return rule;
}

}  // namespace sonde
