// Whether the calling thread is the last live thread of its process: glibc ends a process when
// its last thread ends, and a helper thread of sonde's must not keep one alive.
#pragma once

namespace sonde {

// True when every other task of this process has ended (a main thread that called pthread_exit
// stays a zombie until the process ends, so zombies count as ended). False when unsure.
bool alone_in_process();

}  // namespace sonde
