/* sonde public C API: user regions and explicit flushes.
 *
 * A program marks its phases (data, forward, backward, update) so they appear as frames of the
 * calling-context tree, with the intercepted library calls beneath them. Every function is safe to
 * call when libsonde is not loaded: link against libsonde_api (weak stubs) or libsonde itself.
 *
 *   sonde_region_begin("forward");  ...  sonde_region_end("forward");
 *
 * Regions nest; an end whose name is not the innermost open region closes the regions above it
 * (as an exception unwinding would) and is counted in the run's notes. */
#ifndef SONDE_SONDE_H
#define SONDE_SONDE_H

#ifdef __cplusplus
extern "C" {
#endif

/* Opens a named region on the calling thread. `name` should be a string literal or otherwise
 * outlive the call: the first call per pointer registers it, later calls are a cached lookup. */
void sonde_region_begin(const char* name);

/* Closes the innermost open region named `name` (see above for mismatches). */
void sonde_region_end(const char* name);

/* Declares how many bytes one entry of region `name` moves to and from memory (reads plus
 * writes; e.g. an Adam step over P float32 parameters: 28 P). sonde cannot see what a program's
 * own loops touch; with this, the advice holds an element-wise region's possible gain to what
 * the calibrated memory bandwidth allows (time - calls x bytes / mem.bw). The last value given
 * for a name stands; call it once, outside the loop. */
void sonde_region_bytes(const char* name, unsigned long long bytes);

/* Writes everything measured so far to the output file now. Returns 0 on success. */
int sonde_flush(void);

/* 1 when the measurement library is loaded and recording, 0 otherwise. */
int sonde_active(void);

#ifdef __cplusplus
}
#endif

#endif /* SONDE_SONDE_H */
