# trap_entry: any exception (bad address, illegal instruction, ebreak with no
# debugger attached) reports mcause/mepc/mtval and ends QEMU with status 99,
# so a broken program fails instead of hanging.

    .option arch, +zicsr        # csrr needs Zicsr; -march=rv32im keeps the rv32im multilib

    .text
    .balign 4                   # mtvec needs a 4-byte aligned address
    .globl  trap_entry
trap_entry:
    csrr    a0, mcause
    csrr    a1, mepc
    csrr    a2, mtval
    la      sp, __stack_top
    call    trap_report         # sim.c; does not return
1:  j       1b
