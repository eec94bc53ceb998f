// The sampler's CFI walk against libgcc's unwinder, from the same signal's context: the same
// return addresses, frame by frame, wherever a CPU-time signal lands (prologues, epilogues,
// libm, a function that realigns its stack).
#include "process/cfi_unwind.hpp"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/time.h>
#include <ucontext.h>
#include <unwind.h>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <vector>

namespace sonde {
namespace {

#if defined(__x86_64__)
constexpr int kGreg[kCfiRegs] = {REG_RAX, REG_RDX, REG_RCX, REG_RBX, REG_RSI, REG_RDI,
                                 REG_RBP, REG_RSP, REG_R8,  REG_R9,  REG_R10, REG_R11,
                                 REG_R12, REG_R13, REG_R14, REG_R15, REG_RIP};
constexpr int kMax = 64;

struct Compared {
  std::atomic<int> samples{0};  // read by the loop the signal interrupts
  int agreed = 0, frames = 0;
  uintptr_t first_mismatch = 0;
};
Compared g_seen;
CfiCache* g_cache;

struct Trace {
  uintptr_t pc[kMax];
  int n = 0;
};

_Unwind_Reason_Code collect(_Unwind_Context* c, void* arg) {
  auto* t = static_cast<Trace*>(arg);
  int before = 0;
  t->pc[t->n++] = _Unwind_GetIPInfo(c, &before);
  return t->n == kMax ? _URC_END_OF_STACK : _URC_NO_REASON;
}

void on_prof(int, siginfo_t*, void* context) {
  const auto& g = static_cast<ucontext_t*>(context)->uc_mcontext.gregs;
  Trace ours;
  CfiRegs regs;
  for (int r = 0; r < kCfiRegs; ++r) regs.r[r] = uint64_t(g[kGreg[r]]);
  regs.known = (1u << kCfiRegs) - 1;
  bool exact = true;
  do {
    ours.pc[ours.n++] = regs.r[kCfiRip];
  } while (ours.n < kMax && cfi_step(*g_cache, regs, exact) == CfiStep::kStepped);
  Trace gcc;
  _Unwind_Backtrace(collect, &gcc);
  if (gcc.n > 0 && gcc.pc[gcc.n - 1] == 0) --gcc.n;  // libgcc's last frame: past _start
  int k = 0;  // libgcc starts in this handler: its frames from the interrupted one on
  while (k < gcc.n && gcc.pc[k] != ours.pc[0]) ++k;
  ++g_seen.samples;
  if (k == gcc.n) return;
  bool same = gcc.n - k == ours.n || (ours.n == kMax && gcc.n == kMax);
  for (int i = 0; same && i < ours.n && k + i < gcc.n; ++i) {
    if (ours.pc[i] != gcc.pc[k + i]) {
      same = false;
      if (g_seen.first_mismatch == 0) g_seen.first_mismatch = ours.pc[i];
    }
  }
  g_seen.agreed += same;
  g_seen.frames += ours.n;
}

// A frame that realigns its stack: its CFA is an expression (DW_OP_breg6, DW_OP_deref).
__attribute__((noinline)) double aligned_work(int n) {
  alignas(64) volatile double buf[8];
  double s = 0;
  for (int i = 0; i < n; ++i) {
    buf[i & 7] = std::cos(double(i));
    s += buf[(i + 3) & 7];
  }
  return s;
}

__attribute__((noinline)) double leaf(int n) {
  double s = 0;
  for (int i = 0; i < n; ++i) s += std::sqrt(double(i)) * std::log1p(double(i));
  return s;
}

__attribute__((noinline)) double middle(int depth, int n) {
  if (depth == 0) return leaf(n) + aligned_work(n / 4);
  volatile double r = middle(depth - 1, n);
  return r + 1;
}

TEST(CfiUnwind, SameFramesAsLibgccWhereverACpuSignalLands) {
  CfiCache cache;
  g_cache = &cache;
  g_seen.samples = 0;
  g_seen.agreed = g_seen.frames = 0;
  g_seen.first_mismatch = 0;
  struct sigaction sa {};
  sa.sa_sigaction = on_prof;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigfillset(&sa.sa_mask);
  struct sigaction old {};
  ASSERT_EQ(sigaction(SIGPROF, &sa, &old), 0);
  itimerval every{{0, 1000}, {0, 1000}};
  setitimer(ITIMER_PROF, &every, nullptr);
  volatile double sink = 0;
  while (g_seen.samples < 300) sink = sink + middle(g_seen.samples.load() % 7, 20000);
  itimerval off{};
  setitimer(ITIMER_PROF, &off, nullptr);
  sigaction(SIGPROF, &old, nullptr);
  EXPECT_EQ(g_seen.agreed, g_seen.samples.load())
      << "first differing frame " << std::hex << g_seen.first_mismatch;
  EXPECT_GT(g_seen.frames,
            5 * g_seen.samples.load());  // main, gtest, middle...: deeper than a leaf
  EXPECT_GT(cache.hits, cache.misses);   // the return addresses repeat
}

TEST(CfiUnwind, AnAddressOutsideEveryObjectHasNoTable) {
  EXPECT_EQ(cfi_rule_of(0x1000).kind, CfiFrameRule::kNoTable);
  EXPECT_EQ(cfi_rule_of(reinterpret_cast<uintptr_t>(&leaf) + 4).kind, CfiFrameRule::kCfi);
}
#endif

}  // namespace
}  // namespace sonde
