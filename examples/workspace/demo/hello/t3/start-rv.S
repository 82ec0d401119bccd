# Startup code for the RP2350's Hazard3 cores (TARGET=rp2350-rv).
#
# The bootrom looks for an IMAGE_DEF block in the first 4 KiB of flash and,
# for a RISC-V image without an ENTRY_POINT item, enters it at its lowest
# address: _entry below, at 0x10000000 (RP2350 datasheet 5.9.5.2).

    .section .entry, "ax"
    .globl  _entry
_entry:
    j       _reset

# Minimum RISC-V IMAGE_DEF (datasheet 5.9.5.2): EXE, RISC-V, RP2350.
    .section .image_def, "a"
    .balign 4
    .globl  __image_def
__image_def:
    .word   0xffffded3          # PICOBIN_BLOCK_MARKER_START
    .word   0x11010142          # IMAGE_TYPE item: EXE | CPU RISC-V | CHIP RP2350
    .word   0x000001ff          # LAST item, size 1
    .word   0x00000000          # next block: 0 = this block only
    .word   0xab123579          # PICOBIN_BLOCK_MARKER_END

    .text
    .balign 4
_reset:
    la      sp, __stack_top
    la      t0, trap_entry
    csrw    mtvec, t0

    la      t0, __data_load     # copy .data's initial values from flash to RAM
    la      t1, __data_start
    la      t2, __data_end
1:  bgeu    t1, t2, 2f
    lw      t3, 0(t0)
    sw      t3, 0(t1)
    addi    t0, t0, 4
    addi    t1, t1, 4
    j       1b
2:  la      t1, __bss_start     # zero .bss
    la      t2, __bss_end
3:  bgeu    t1, t2, 4f
    sw      zero, 0(t1)
    addi    t1, t1, 4
    j       3b
4:  call    main
5:  wfi                         # main never returns; if it does, sleep
    j       5b

# A trap stops here, so a debugger shows mcause/mepc instead of a runaway core.
    .balign 4
trap_entry:
    j       trap_entry
