#include "core/call_sites.hpp"

#include <gtest/gtest.h>

#include <string>

#include "frames.hpp"

namespace sonde {
namespace {

using test::enter_at;
using test::leave_at;

// A native call site: a local function, named only through the program's .symtab.
__attribute__((noinline)) int call_sites_caller(int x) {
  asm volatile("" ::: "memory");
  return x + 1;
}

// A return address inside call_sites_caller (symbolize steps back one byte).
const void* native_site() { return reinterpret_cast<const char*>(&call_sites_caller) + 2; }

const CallCost kGemm{128, 64, GemmShape{4, 4, 4, 1, 'N', 'N', DType::kF32}};

// Real routines, a real thread state driven through the hot path's frame steps, and the real
// symbolizer: what the runtime hands the store at each flush.
class CallSitesTest : public testing::Test {
 protected:
  RoutineId python(const char* name, int line) {
    return registry_.intern({name, "python", "", "train.py", line});
  }
  void gemm_at(uint64_t at, const void* site) {
    enter_at(t_, sgemm_, at);
    leave_at(t_, at + 5, &kGemm, site);
  }
  ThreadSnapshot named(uint64_t now) {
    ThreadSnapshot s = take_snapshot(t_, Clock{}, now);
    sites_.name(s, registry_);
    return s;
  }

  RoutineRegistry registry_;
  RoutineId sgemm_ = registry_.intern({"cblas_sgemm", "blas", "libopenblas.so.0"});
  RoutineId region_ = registry_.intern({"step", "region", ""});
  ThreadState t_{0, 7, 0, 32, 0};
  CallSites sites_;
};

TEST_F(CallSitesTest, TheNearestPythonFrameAboveTheCall) {
  RoutineId main = python("main", 1), forward = python("forward", 12);
  enter_at(t_, main, 10);
  enter_at(t_, forward, 20);
  enter_at(t_, region_, 30);  // a user region between the frame and the call is passed over
  gemm_at(40, reinterpret_cast<const void*>(0x1234));
  leave_at(t_, 50);
  leave_at(t_, 60);
  gemm_at(70, reinterpret_cast<const void*>(0x1234));  // straight under main
  leave_at(t_, 80);
  ThreadSnapshot s = named(100);
  ASSERT_EQ(s.shapes.size(), 2u);
  EXPECT_EQ(s.shapes[0].call_site, "forward");
  EXPECT_EQ(s.shapes[1].call_site, "main");
}

TEST_F(CallSitesTest, WithoutAPythonFrameTheNativeCallerIsNamed) {
  enter_at(t_, region_, 10);
  gemm_at(20, native_site());
  leave_at(t_, 30);
  gemm_at(40, native_site());  // another call path, the same caller
  ThreadSnapshot s = named(100);
  ASSERT_EQ(s.shapes.size(), 2u);
  std::string site(s.shapes[0].call_site);
  EXPECT_NE(site.find("call_sites_caller"), std::string::npos) << site;
  EXPECT_NE(site.find("[sonde_libprof_tests]"), std::string::npos) << site;
  // Symbolized once: both rows name the same stored text.
  EXPECT_EQ(s.shapes[1].call_site.data(), s.shapes[0].call_site.data());
}

// Routines interned after an earlier flush (a module imported late) are known to the next one.
TEST_F(CallSitesTest, RoutinesInternedAfterAFlushAreSeenByTheNext) {
  gemm_at(10, native_site());
  ThreadSnapshot first = named(20);
  ASSERT_EQ(first.shapes.size(), 1u);
  EXPECT_NE(std::string(first.shapes[0].call_site).find("call_sites_caller"), std::string::npos);
  RoutineId late = python("late_module_fn", 40);
  enter_at(t_, late, 30);
  gemm_at(40, native_site());
  leave_at(t_, 50);
  ThreadSnapshot second = named(60);
  ASSERT_EQ(second.shapes.size(), 2u);
  EXPECT_EQ(second.shapes[1].call_site, "late_module_fn");
}

// A snapshot nobody named carries "" (never a null text the store would write as NULL).
TEST_F(CallSitesTest, AnUnnamedShapeHasAnEmptySite) {
  gemm_at(10, native_site());
  ThreadSnapshot s = take_snapshot(t_, Clock{}, 20);
  ASSERT_EQ(s.shapes.size(), 1u);
  EXPECT_NE(s.shapes[0].call_site.data(), nullptr);
  EXPECT_TRUE(s.shapes[0].call_site.empty());
}

}  // namespace
}  // namespace sonde
