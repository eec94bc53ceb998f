// find_object's answer before glibc 2.35 (dl_iterate_phdr's walk) against glibc's own
// _dl_find_object, on objects of every kind a process has: the program, libc, libm, a library
// opened at run time, and addresses in no object.
#include "symbols/find_object.hpp"

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <math.h>
#include <stdio.h>

#include <string>
#include <vector>

#include "symbols/loader_free.hpp"

namespace sonde {
namespace {

int g_data = 1;  // the program's writable data

void expect_same(const void* address, const std::string& what) {
  SCOPED_TRACE(what);
  dl_find_object native{}, walked{};
  int n = find_object_lock_free(address, &native);
  int w = find_object_walking(address, &walked);
  ASSERT_EQ(n, w);
  if (n != 0) return;
  EXPECT_EQ(walked.dlfo_link_map, native.dlfo_link_map);
  EXPECT_EQ(walked.dlfo_map_start, native.dlfo_map_start);
  EXPECT_EQ(walked.dlfo_map_end, native.dlfo_map_end);
  EXPECT_EQ(walked.dlfo_eh_frame, native.dlfo_eh_frame);
  EXPECT_EQ(walked.dlfo_flags, 0ull);
}

TEST(FindObject, WalkAgreesWithGlibcs) {
  if (!find_object_is_lock_free()) GTEST_SKIP() << "glibc older than 2.35: nothing to hold it to";
  expect_same(reinterpret_cast<const void*>(&expect_same), "the program's code");
  expect_same(&g_data, "the program's data");
  expect_same(reinterpret_cast<const void*>(&printf), "libc");
  double (*cosine)(double) = &cos;
  expect_same(reinterpret_cast<const void*>(cosine), "libm");
  void* handle = dlopen("libsqlite3.so.0", RTLD_NOW | RTLD_LOCAL);
  if (handle != nullptr) {
    expect_same(dlsym(handle, "sqlite3_libversion"), "a library opened at run time");
    dlclose(handle);
  }
  int on_stack = 0;
  expect_same(&on_stack, "the stack (no object)");
  expect_same(nullptr, "null");
}

TEST(FindObject, WalkFindsTheProgramAndLibc) {
  dl_find_object found{};
  ASSERT_EQ(find_object_walking(reinterpret_cast<const void*>(&printf), &found), 0);
  ASSERT_NE(found.dlfo_link_map, nullptr);
  EXPECT_NE(std::string(found.dlfo_link_map->l_name).find("libc.so"), std::string::npos);
  EXPECT_NE(found.dlfo_eh_frame, nullptr);
  ASSERT_EQ(find_object_walking(reinterpret_cast<const void*>(&expect_same), &found), 0);
  EXPECT_STREQ(found.dlfo_link_map->l_name, "");  // the program's own, as the loader names it
}

TEST(FindObject, LoaderFreeThreadGetsOnlyLockFreeAnswers) {
  LoaderFree guard;
  dl_find_object found{};
  int got = find_object(reinterpret_cast<const void*>(&printf), &found);
  EXPECT_EQ(got, find_object_is_lock_free() ? 0 : -1);
}

}  // namespace
}  // namespace sonde
