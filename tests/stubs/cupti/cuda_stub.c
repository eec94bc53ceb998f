// A stand-in for the CUDA driver (libcuda.so.1): its presence is what tells sonde that a
// process uses CUDA. The CUPTI stub does the rest.
int cuInit(unsigned int flags) { return flags == 0 ? 0 : 1; }
