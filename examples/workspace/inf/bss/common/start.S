# Startup code for QEMU's virt machine (-bios none jumps to 0x80000000).
# Tasks 2 and 3 write their own start.S; the others use this one.
#
#   1. stack pointer and trap handler
#   2. copy .data from its load address (LMA) to its run address (VMA);
#      with common/link.ld they are equal and the loop copies nothing
#   3. zero .bss
#   4. main(); its return value ends QEMU (0 = success)

    .option arch, +zicsr        # csrw needs Zicsr; -march=rv32im keeps the rv32im multilib

    .section .text.start, "ax"
    .globl  _start
_start:
    la      sp, __stack_top
    la      t0, trap_entry
    csrw    mtvec, t0

    la      t0, __data_load
    la      t1, __data_start
    la      t2, __data_end
    beq     t0, t1, 2f          # already in place
1:  bgeu    t1, t2, 2f
    lw      t3, 0(t0)
    sw      t3, 0(t1)
    addi    t0, t0, 4
    addi    t1, t1, 4
    j       1b

2:  la      t0, __bss_start
    la      t1, __bss_end
3:  bgeu    t0, t1, 4f
    sw      zero, 0(t0)
    addi    t0, t0, 4
    j       3b

4:  call    main
    call    sim_exit            # a0 = main's return value
5:  j       5b
