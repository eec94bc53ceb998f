// Regions whose names a terminal, a JSON encoder or a folded-stack reader could trip over: invalid
// UTF-8, ';', a newline, an empty name, a terminal escape sequence. Each region runs a GEMM so it
// has time of its own. Prints its pid, so a test can tell which profile is this run's.
#include <cblas.h>
#include <sonde/sonde.h>
#include <stdio.h>
#include <unistd.h>

static const char* const kNames[] = {
    "bad\xff\xfe utf8", "semi;colon", "new\nline", "", "\x1b]0;pwned\x07title", "tab\there",
};

int main(void) {
  float a[64 * 64], b[64 * 64], c[64 * 64];
  for (int i = 0; i < 64 * 64; ++i) a[i] = b[i] = 1.0f;
  for (unsigned r = 0; r < sizeof kNames / sizeof kNames[0]; ++r) {
    sonde_region_begin(kNames[r]);
    for (int i = 0; i < 20; ++i)
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, 64, 64, 64, 1.0f, a, 64, b, 64, 0.0f,
                  c, 64);
    sonde_region_end(kNames[r]);
  }
  printf("pid %d c[0] = %g\n", (int)getpid(), c[0]);
  return 0;
}
