# Task 2: startup code that zeroes .bss.
#
# C promises that a global without an initialiser starts at 0. Nothing in
# the ELF file holds those zeros (.bss is NOLOAD): the startup code must
# write them before main runs. common/link.ld gives the range:
#     __bss_start  first byte of .bss (4-byte aligned)
#     __bss_end    one past the last byte (4-byte aligned)

    .option arch, +zicsr        # csrw needs Zicsr; -march=rv32im keeps the rv32im multilib

    .section .text.start, "ax"
    .globl  _start
_start:
    la      sp, __stack_top
    la      t0, trap_entry
    csrw    mtvec, t0

    # QEMU's RAM starts zeroed, a real chip's does not: fill .bss with
    # 0xdeadbeef so that a missing loop below shows (common/poison.S).
    la      a0, __bss_start
    la      a1, __bss_end
    call    poison_ram

    # ---- task 2: zero .bss, one word (4 bytes) at a time ----
    la      t0, __bss_start     # t0 = next word to clear
    la      t1, __bss_end       # t1 = end of .bss
zero_bss:
    bgeu    t0, t1, bss_done    # t0 >= end: done (also when .bss is empty)
    sw      zero, 0(t0)         # *t0 = 0
    addi    t0, t0, 4
    j       zero_bss
bss_done:
    # ---- end of task 2 ----

    call    main
    call    sim_exit            # a0 = main's return value
1:  j       1b
