// A host whose hot loop has unwind information that lies: it says the frame pointer holds the
// frame, then loads rbp with a small number. An unwinder that follows it reads unmapped memory;
// the sampler must lose those samples, never the host.
#include <stdio.h>

void spin_misleading(long n);
__asm__(
    ".text\n.globl spin_misleading\n.type spin_misleading,@function\nspin_misleading:\n"
    ".cfi_startproc\n"
    "push %rbp\n.cfi_def_cfa_offset 16\n.cfi_offset rbp, -16\n"
    "mov $0x10, %rbp\n.cfi_def_cfa rbp, 16\n"  // CFA = 0x20: unmapped
    "mov %rdi, %rcx\n1: dec %rcx\njnz 1b\n"
    "pop %rbp\n.cfi_def_cfa rsp, 8\nret\n.cfi_endproc\n"
    ".size spin_misleading, .-spin_misleading\n");

int main(void) {
  for (int i = 0; i < 20; ++i) spin_misleading(20000000);
  puts("misleading_cfi done");
  return 0;
}
