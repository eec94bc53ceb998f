#include "process/seccomp_program.hpp"

#include <linux/audit.h>

#include <cstring>

namespace sonde {

namespace {

constexpr size_t kMaxInstructions = BPF_MAXINSNS;  // what the kernel takes at most
constexpr uint32_t kDataSize = sizeof(seccomp_data);

// The instructions kernel/seccomp.c lets a filter hold (its seccomp_check_filter), beside the
// checks every classic program passes (jumps inside it, scratch words 0-15, no constant
// division by zero or shift past 31, a return at its end). Anything else: not a program.
bool valid(const std::vector<sock_filter>& program) {
  if (program.empty() || program.size() > kMaxInstructions) return false;
  size_t n = program.size();
  for (size_t pc = 0; pc < n; ++pc) {
    const sock_filter& f = program[pc];
    switch (f.code) {
      case BPF_LD | BPF_W | BPF_ABS:
        if (f.k >= kDataSize || (f.k & 3) != 0) return false;
        break;
      case BPF_LD | BPF_W | BPF_LEN:
      case BPF_LDX | BPF_W | BPF_LEN:
      case BPF_RET | BPF_K:
      case BPF_RET | BPF_A:
      case BPF_LD | BPF_IMM:
      case BPF_LDX | BPF_IMM:
      case BPF_MISC | BPF_TAX:
      case BPF_MISC | BPF_TXA:
      case BPF_ALU | BPF_NEG:
        break;
      case BPF_ALU | BPF_ADD | BPF_K:
      case BPF_ALU | BPF_ADD | BPF_X:
      case BPF_ALU | BPF_SUB | BPF_K:
      case BPF_ALU | BPF_SUB | BPF_X:
      case BPF_ALU | BPF_MUL | BPF_K:
      case BPF_ALU | BPF_MUL | BPF_X:
      case BPF_ALU | BPF_DIV | BPF_X:
      case BPF_ALU | BPF_AND | BPF_K:
      case BPF_ALU | BPF_AND | BPF_X:
      case BPF_ALU | BPF_OR | BPF_K:
      case BPF_ALU | BPF_OR | BPF_X:
      case BPF_ALU | BPF_XOR | BPF_K:
      case BPF_ALU | BPF_XOR | BPF_X:
      case BPF_ALU | BPF_LSH | BPF_X:
      case BPF_ALU | BPF_RSH | BPF_X:
        break;
      case BPF_ALU | BPF_DIV | BPF_K:
        if (f.k == 0) return false;
        break;
      case BPF_ALU | BPF_LSH | BPF_K:
      case BPF_ALU | BPF_RSH | BPF_K:
        if (f.k >= 32) return false;
        break;
      case BPF_LD | BPF_MEM:
      case BPF_LDX | BPF_MEM:
      case BPF_ST:
      case BPF_STX:
        if (f.k >= BPF_MEMWORDS) return false;
        break;
      case BPF_JMP | BPF_JA:
        if (f.k >= n - pc - 1) return false;
        break;
      case BPF_JMP | BPF_JEQ | BPF_K:
      case BPF_JMP | BPF_JEQ | BPF_X:
      case BPF_JMP | BPF_JGE | BPF_K:
      case BPF_JMP | BPF_JGE | BPF_X:
      case BPF_JMP | BPF_JGT | BPF_K:
      case BPF_JMP | BPF_JGT | BPF_X:
      case BPF_JMP | BPF_JSET | BPF_K:
      case BPF_JMP | BPF_JSET | BPF_X:
        if (pc + 1 + f.jt >= n || pc + 1 + f.jf >= n) return false;
        break;
      default:
        return false;
    }
  }
  return BPF_CLASS(program.back().code) == BPF_RET;
}

uint32_t word_at(const seccomp_data& call, uint32_t offset) {
  uint32_t w;
  std::memcpy(&w, reinterpret_cast<const char*>(&call) + offset, sizeof w);
  return w;
}

uint32_t alu(uint16_t op, uint32_t a, uint32_t operand) {
  switch (op) {
    case BPF_ADD:
      return a + operand;
    case BPF_SUB:
      return a - operand;
    case BPF_MUL:
      return a * operand;
    case BPF_DIV:
      return a / operand;  // a zero divisor is the caller's case
    case BPF_AND:
      return a & operand;
    case BPF_OR:
      return a | operand;
    case BPF_XOR:
      return a ^ operand;
    case BPF_LSH:
      return a << (operand & 31);
    case BPF_RSH:
      return a >> (operand & 31);
    default:
      return 0;  // BPF_NEG has no operand and is done by the caller
  }
}

}  // namespace

std::optional<uint32_t> seccomp_verdict(const std::vector<sock_filter>& program,
                                        const seccomp_data& call) {
  if (!valid(program)) return std::nullopt;
  uint32_t a = 0, x = 0;
  uint32_t mem[BPF_MEMWORDS] = {};
  // Every jump goes forward (valid() bounds them), so this ends within size() steps.
  for (size_t pc = 0; pc < program.size(); ++pc) {
    const sock_filter& f = program[pc];
    switch (BPF_CLASS(f.code)) {
      case BPF_LD:
        a = BPF_MODE(f.code) == BPF_ABS   ? word_at(call, f.k)
            : BPF_MODE(f.code) == BPF_LEN ? kDataSize
            : BPF_MODE(f.code) == BPF_MEM ? mem[f.k]
                                          : f.k;
        break;
      case BPF_LDX:
        x = BPF_MODE(f.code) == BPF_LEN ? kDataSize : BPF_MODE(f.code) == BPF_MEM ? mem[f.k] : f.k;
        break;
      case BPF_ST:
        mem[f.k] = a;
        break;
      case BPF_STX:
        mem[f.k] = x;
        break;
      case BPF_ALU: {
        if (BPF_OP(f.code) == BPF_NEG) {
          a = 0u - a;
          break;
        }
        uint32_t operand = BPF_SRC(f.code) == BPF_X ? x : f.k;
        if (BPF_OP(f.code) == BPF_DIV && operand == 0) return 0u;  // the kernel's answer: kill
        a = alu(BPF_OP(f.code), a, operand);
        break;
      }
      case BPF_JMP: {
        if (BPF_OP(f.code) == BPF_JA) {
          pc += f.k;
          break;
        }
        uint32_t operand = BPF_SRC(f.code) == BPF_X ? x : f.k;
        bool taken = BPF_OP(f.code) == BPF_JEQ   ? a == operand
                     : BPF_OP(f.code) == BPF_JGT ? a > operand
                     : BPF_OP(f.code) == BPF_JGE ? a >= operand
                                                 : (a & operand) != 0;
        pc += taken ? f.jt : f.jf;
        break;
      }
      case BPF_RET:
        return BPF_RVAL(f.code) == BPF_A ? a : f.k;
      case BPF_MISC:
        if (BPF_MISCOP(f.code) == BPF_TAX)
          x = a;
        else
          a = x;
        break;
      default:
        return std::nullopt;
    }
  }
  return std::nullopt;
}

bool seccomp_allows(const std::vector<sock_filter>& program, const seccomp_data& call) {
  std::optional<uint32_t> verdict = seccomp_verdict(program, call);
  if (!verdict) return false;
  uint32_t action = *verdict & SECCOMP_RET_ACTION_FULL;
  return action == SECCOMP_RET_ALLOW || action == SECCOMP_RET_LOG;
}

uint32_t seccomp_native_arch() {
#if defined(__x86_64__)
  return AUDIT_ARCH_X86_64;
#elif defined(__aarch64__)
  return AUDIT_ARCH_AARCH64;
#else
  return 0;
#endif
}

}  // namespace sonde
