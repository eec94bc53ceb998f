#include "base/deep_stack.hpp"

#include <pthread.h>

#include <exception>

namespace sonde::analyzers {
namespace {

struct Job {
  const std::function<void()>* work;
  std::exception_ptr error;
};

void* run(void* arg) {
  auto* job = static_cast<Job*>(arg);
  try {
    (*job->work)();
  } catch (...) {
    job->error = std::current_exception();
  }
  return nullptr;
}

}  // namespace

void on_deep_stack(const std::function<void()>& work) {
  Job job{&work, nullptr};
  pthread_attr_t attr;
  pthread_t thread;
  bool started = false;
  if (::pthread_attr_init(&attr) == 0) {
    started = ::pthread_attr_setstacksize(&attr, kDeepStackBytes) == 0 &&
              ::pthread_create(&thread, &attr, run, &job) == 0;
    ::pthread_attr_destroy(&attr);
  }
  if (!started) {
    work();
    return;
  }
  ::pthread_join(thread, nullptr);
  if (job.error) std::rethrow_exception(job.error);
}

}  // namespace sonde::analyzers
