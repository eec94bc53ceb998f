// The cuBLAS/cuDNN one-outermost-call guard (wrappers/outermost_call.hpp) on the real stack: a
// call of the family made inside another is folded into it, and a call a longjmp left (issue 37)
// is not taken for the outer call of every later one.
#include "outermost_call.hpp"

#include <gtest/gtest.h>
#include <setjmp.h>

#include <vector>

namespace sonde {
namespace {

struct TestFamily {};
using Guard = OutermostCall<TestFamily>;

jmp_buf g_back;
std::vector<RoutineId> g_seen;  // the id each wrapper call measured (0: folded into its caller)

// A wrapper of the family, as SONDE_INTERCEPT_AS expands one: the guard, then the real function.
__attribute__((noinline)) void wrapper(RoutineId routine, void (*real)()) {
  const Guard call(routine);
  g_seen.push_back(call.id);
  real();
  asm volatile("" ::: "memory");
}

// The same with a frame 4 KiB deeper: its guard lies far below the small wrapper's.
__attribute__((noinline)) void big_wrapper(RoutineId routine, void (*real)()) {
  volatile char frame[4096];
  frame[0] = 0;
  const Guard call(routine);
  g_seen.push_back(call.id + frame[0]);
  real();
  asm volatile("" ::: "memory");
}

void nothing() {}
void nested() { wrapper(9, nothing); }
void jump() { longjmp(g_back, 1); }

// Calls `w`, whose real function jumps back here, as a signal handler's siglongjmp would.
__attribute__((noinline)) void left_by_jump(void (*w)(RoutineId, void (*)()), RoutineId routine) {
  if (setjmp(g_back) == 0) w(routine, jump);
}

TEST(OutermostCall, ACallInsideAnotherOfTheFamilyIsFolded) {
  g_seen.clear();
  wrapper(1, nested);
  wrapper(2, nothing);
  EXPECT_EQ(g_seen, (std::vector<RoutineId>{1, 0, 2}));
}

// Before: the left call's depth stayed, and every later call was taken for a nested one (0).
TEST(OutermostCall, ACallLeftByALongjmpDoesNotFoldTheNextOnes) {
  g_seen.clear();
  left_by_jump(wrapper, 1);
  wrapper(2, nothing);
  wrapper(3, nested);  // still folded inside a measured call
  left_by_jump(wrapper, 4);
  left_by_jump(wrapper, 5);  // two left in a row
  big_wrapper(6, nested);
  left_by_jump(big_wrapper, 7);  // a deep wrapper's left call, then a shallow wrapper's call
  wrapper(8, nothing);
  EXPECT_EQ(g_seen, (std::vector<RoutineId>{1, 2, 3, 0, 4, 5, 6, 0, 7, 8}));
}

}  // namespace
}  // namespace sonde
