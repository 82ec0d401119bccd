# Startup code: QEMU jumps here (0x80000000) with -bios none.
# It sets the stack, installs a trap handler, zeroes .bss, calls main and
# ends the simulation with main's return value.

    .option arch, +zicsr        # csrw needs Zicsr; -march=rv32im keeps the rv32im multilib

    .section .text.start, "ax"
    .globl _start
_start:
    la      sp, __stack_top
    la      t0, trap_entry
    csrw    mtvec, t0

    la      t0, __bss_start     # zero .bss, a word at a time
    la      t1, __bss_end
1:  bgeu    t0, t1, 2f
    sw      zero, 0(t0)
    addi    t0, t0, 4
    j       1b
2:
    call    main
    call    sim_exit            # a0 = main's return value
3:  j       3b

# Any exception (bad address, illegal instruction, ebreak without gdb)
# lands here: report it and fail instead of hanging.
    .text
    .balign 4
trap_entry:
    csrr    a0, mcause
    csrr    a1, mepc
    csrr    a2, mtval
    la      sp, __stack_top
    call    trap_report
4:  j       4b
