/* SPDX-License-Identifier: MIT
 * Door (b): our exported dlsym. glibc resolves RTLD_NEXT and RTLD_DEFAULT relative to the
 * CALLER's object, found from the return address: those two must reach glibc by a tail jump so
 * the caller stays the caller (cuda-interception.md 1.5; a normal call makes libomp's
 * dlsym(RTLD_NEXT) recurse forever). Written in assembly so no build type can turn the jump
 * into a call. Explicit handles go to gpumemprof_dlsym_handle (C++), which substitutes hooks. */
#if defined(__x86_64__)
    .text
    .globl dlsym
    .type dlsym, @function
dlsym:
    .cfi_startproc
    movq gpumemprof_real_dlsym_ptr(%rip), %rax
    testq %rax, %rax
    jz 2f
1:
    testq %rdi, %rdi            /* RTLD_DEFAULT == 0 */
    je 3f
    cmpq $-1, %rdi              /* RTLD_NEXT == -1 */
    je 3f
    jmp gpumemprof_dlsym_handle
3:
    jmp *%rax
2:
    pushq %rdi
    .cfi_adjust_cfa_offset 8
    pushq %rsi
    .cfi_adjust_cfa_offset 8
    subq $8, %rsp               /* keep the stack 16-byte aligned for the call */
    .cfi_adjust_cfa_offset 8
    call gpumemprof_resolve_real_dlsym
    addq $8, %rsp
    .cfi_adjust_cfa_offset -8
    popq %rsi
    .cfi_adjust_cfa_offset -8
    popq %rdi
    .cfi_adjust_cfa_offset -8
    testq %rax, %rax
    jnz 1b
    xorl %eax, %eax             /* no glibc dlsym found: behave as a failed lookup */
    ret
    .cfi_endproc
    .size dlsym, .-dlsym
    .section .note.GNU-stack,"",@progbits
#else
#error "gpumemprof's dlsym entry is written for x86-64 only"
#endif
