# void poison_ram(void *start, void *end): fill [start, end) with 0xdeadbeef.
#
# QEMU starts with RAM full of zeros; a real chip after reset (or after the
# previous program) does not. Startup code that forgets to zero .bss or to
# copy .data would go unnoticed in QEMU, so tasks 2 and 3 fill that RAM with
# garbage first. Both addresses must be 4-byte aligned.

    .text
    .globl  poison_ram
    .type   poison_ram, @function
poison_ram:
    li      t0, 0xdeadbeef
1:  bgeu    a0, a1, 2f
    sw      t0, 0(a0)
    addi    a0, a0, 4
    j       1b
2:  ret
    .size   poison_ram, . - poison_ram
