# Task 3: startup code that copies .data from ROM to RAM.
#
# link.ld stores .data's initial values in ROM, after .rodata, but the
# program uses the variables at their RAM addresses:
#     __data_load   where the initial values are (load address, in ROM)
#     __data_start  where .data runs (in RAM), 4-byte aligned
#     __data_end    one past its last byte, 4-byte aligned

    .option arch, +zicsr        # csrw needs Zicsr; -march=rv32im keeps the rv32im multilib

    .section .text.start, "ax"
    .globl  _start
_start:
    la      sp, __stack_top
    la      t0, trap_entry
    csrw    mtvec, t0

    # RAM of a real chip holds garbage at reset; QEMU's holds zeros. Fill
    # .data's and .bss's RAM with 0xdeadbeef so mistakes show (common/poison.S).
    la      a0, __data_start
    la      a1, __bss_end
    call    poison_ram

    # ---- task 3: copy .data, one word at a time ----
    la      t0, __data_load     # t0 = source (ROM)
    la      t1, __data_start    # t1 = destination (RAM)
    la      t2, __data_end      # t2 = end of the destination
copy_data:
    bgeu    t1, t2, data_done
    lw      t3, 0(t0)           # t3 = *source
    sw      t3, 0(t1)           # *destination = t3
    addi    t0, t0, 4
    addi    t1, t1, 4
    j       copy_data
data_done:
    # ---- end of task 3 ----

    la      t0, __bss_start     # zero .bss (task 2)
    la      t1, __bss_end
zero_bss:
    bgeu    t0, t1, bss_done
    sw      zero, 0(t0)
    addi    t0, t0, 4
    j       zero_bss
bss_done:

    call    main
    call    sim_exit            # a0 = main's return value
1:  j       1b
