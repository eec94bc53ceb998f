/* First-touches PAGES pages inside the region "touch", then computes inside its sibling
 * "idle": with SONDE_COUNTERS=perf::PAGE-FAULTS the faults belong under "touch" only.
 * Usage: page_touch PAGES */
#include <stdio.h>
#include <stdlib.h>

#include "sonde/sonde.h"
int main(int argc, char** argv) {
  int pages = argc > 1 ? atoi(argv[1]) : 200;
  sonde_region_begin("touch");
  char* p = malloc((size_t)pages * 4096 + 4096);
  for (int i = 0; i < pages; i++) p[(size_t)i * 4096] = 1;
  sonde_region_end("touch");
  sonde_region_begin("idle");
  double s = 0;
  for (int i = 0; i < 1000000; i++) s += i * 0.5;
  sonde_region_end("idle");
  printf("%d %.0f\n", p[0], s);
  return 0;
}
