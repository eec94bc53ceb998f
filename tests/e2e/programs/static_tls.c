/* A library with 1 KB of initial-exec thread-local storage, as libgomp and other OpenMP and
 * GPU runtimes have (less, usually): dlopen'ed after an in-process sonde, it must still find
 * room in the static TLS area that glibc keeps spare (about 1.5 KB for a running python3). */
__thread char static_tls_block[1024] __attribute__((tls_model("initial-exec")));

int static_tls_touch(void) {
  static_tls_block[1023] = 1;
  return static_tls_block[1023];
}
