# Startup code for the RP2350's Hazard3 cores (TARGET=rp2350-rv); it plays
# the part of ../start.S.
#
# The bootrom looks for an IMAGE_DEF block in the first 4 KiB of flash and,
# for a RISC-V image without an ENTRY_POINT item, enters it at its lowest
# address: _entry below, at 0x10000000 (RP2350 datasheet 5.9.5.2).
#
#   1. stack pointer and trap handler (../trap.S)
#   2. copy .data from flash (its load address) to SRAM (its run address):
#      unlike on QEMU, here the two differ and the copy is what gives
#      initialised globals their values
#   3. zero .bss: SRAM holds whatever was there before
#   4. uart_init (uart.c), main(), then sim_exit with main's return value

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

    la      t0, __data_load     # copy .data's initial values from flash to SRAM
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
4:  call    uart_init
    call    main
    call    sim_exit            # a0 = main's return value; does not return
5:  wfi
    j       5b
