// packaging/portable/younger_glibc.c, linked into this test as into the shipped binaries: the
// stand-ins for what glibc added after 2.28. Their fallbacks run only on a glibc older than
// the one here (2.28-2.29), so they are called directly.
#include <errno.h>
#include <gtest/gtest.h>
#include <math.h>
#include <pthread.h>
#include <time.h>

#include <chrono>
#include <cmath>
#include <condition_variable>
#include <mutex>

extern "C" int sonde_clockwait_by_realtime(pthread_cond_t* cond, pthread_mutex_t* mutex,
                                           clockid_t clock, const struct timespec* deadline);

namespace {

timespec in(clockid_t clock, long ms) {
  timespec t{};
  clock_gettime(clock, &t);
  long ns = t.tv_nsec + ms * 1'000'000;
  t.tv_sec += ns / 1'000'000'000;
  t.tv_nsec = ns % 1'000'000'000;
  return t;
}

double elapsed_ms(std::chrono::steady_clock::time_point from) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - from).count();
}

// Before 2.30: a CLOCK_MONOTONIC deadline waited for on CLOCK_REALTIME lasts as long.
TEST(YoungerGlibc, ClockWaitFallbackTimesOutAtTheDeadline) {
  pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
  pthread_mutex_t mutex = PTHREAD_MUTEX_INITIALIZER;
  pthread_mutex_lock(&mutex);
  auto from = std::chrono::steady_clock::now();
  timespec deadline = in(CLOCK_MONOTONIC, 60);
  EXPECT_EQ(sonde_clockwait_by_realtime(&cond, &mutex, CLOCK_MONOTONIC, &deadline), ETIMEDOUT);
  double waited = elapsed_ms(from);
  EXPECT_GE(waited, 59.0);
  EXPECT_LT(waited, 1000.0);
  timespec past = in(CLOCK_MONOTONIC, -50);
  from = std::chrono::steady_clock::now();
  EXPECT_EQ(sonde_clockwait_by_realtime(&cond, &mutex, CLOCK_MONOTONIC, &past), ETIMEDOUT);
  EXPECT_LT(elapsed_ms(from), 50.0);
  pthread_mutex_unlock(&mutex);
}

TEST(YoungerGlibc, ClockWaitFallbackWakesOnASignal) {
  pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
  pthread_mutex_t mutex = PTHREAD_MUTEX_INITIALIZER;
  bool ready = false;
  pthread_t t;
  struct Args {
    pthread_cond_t* cond;
    pthread_mutex_t* mutex;
    bool* ready;
  } args{&cond, &mutex, &ready};
  pthread_mutex_lock(&mutex);
  pthread_create(
      &t, nullptr,
      [](void* p) -> void* {
        auto* a = static_cast<Args*>(p);
        pthread_mutex_lock(a->mutex);
        *a->ready = true;
        pthread_cond_signal(a->cond);
        pthread_mutex_unlock(a->mutex);
        return nullptr;
      },
      &args);
  timespec deadline = in(CLOCK_MONOTONIC, 10'000);
  int rc = 0;
  while (!ready && rc == 0)
    rc = sonde_clockwait_by_realtime(&cond, &mutex, CLOCK_MONOTONIC, &deadline);
  pthread_mutex_unlock(&mutex);
  pthread_join(t, nullptr);
  EXPECT_EQ(rc, 0);
  EXPECT_TRUE(ready);
}

// libstdc++'s steady-clock wait goes through the stand-in (glibc's own here): it still times out.
TEST(YoungerGlibc, ConditionVariableWaitForTimesOut) {
  std::mutex m;
  std::condition_variable cv;
  std::unique_lock lock(m);
  auto from = std::chrono::steady_clock::now();
  EXPECT_EQ(cv.wait_for(lock, std::chrono::milliseconds(30)), std::cv_status::timeout);
  EXPECT_GE(elapsed_ms(from), 29.0);
}

// The 2.2.5 versions of exp, log, log2 and pow: the same values as the current ones.
TEST(YoungerGlibc, OldMathVersionsGiveTheSameValues) {
  volatile double x = 1.7, y = 3.25;
  EXPECT_DOUBLE_EQ(exp(x), 5.4739473917272);
  EXPECT_DOUBLE_EQ(log(x), 0.5306282510621704);
  EXPECT_DOUBLE_EQ(log2(x), 0.765534746362977);
  EXPECT_DOUBLE_EQ(pow(x, y), 5.60995005112425);
  EXPECT_TRUE(std::isinf(log(0.0)));
}

}  // namespace
