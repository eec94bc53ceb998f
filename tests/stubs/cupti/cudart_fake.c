// An empty library that a test copies into a pip-style tree as libcudart.so.12: what sonde
// looks at is the runtime's file name and folder, never its code.
int cudart_fake_present(void) { return 1; }
