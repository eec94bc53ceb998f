// Whether the calling thread is the last live thread of its process: glibc ends a process when
// its last thread ends, and a helper thread of sonde's must not keep one alive.
#pragma once

namespace sonde {

// True when every other task of this process has ended (a main thread that called pthread_exit
// stays a zombie until the process ends, so zombies count as ended). False when unsure.
bool alone_in_process();

// The status the main thread ended with (its raw SYS_exit's argument), read from /proc while it
// is a zombie; -1 when it has not ended or /proc does not say. A process whose last thread ends
// so ends with that thread's argument as its status.
int main_thread_exit_code();

}  // namespace sonde
