@ Startup code for the RP2350's Cortex-M33 cores (TARGET=rp2350-arm).
@
@ The image starts with a Cortex-M vector table: with the minimum IMAGE_DEF
@ (no VECTOR_TABLE / ENTRY_POINT item) the bootrom takes the initial stack
@ pointer and the reset handler from the start of the image (datasheet 5.9.5.1).

    .syntax unified
    .cpu    cortex-m33
    .thumb

    .section .vectors, "a"
    .balign 128                 @ VTOR needs the table aligned to its size
    .globl  __vectors
__vectors:
    .word   __stack_top         @ 0: initial SP
    .word   Reset_Handler       @ 1: reset (Thumb bit set by .thumb_func)
    .word   Default_Handler     @ 2: NMI
    .word   Default_Handler     @ 3: HardFault
    .word   Default_Handler     @ 4: MemManage
    .word   Default_Handler     @ 5: BusFault
    .word   Default_Handler     @ 6: UsageFault
    .word   Default_Handler     @ 7: SecureFault
    .word   0, 0, 0             @ 8-10: reserved
    .word   Default_Handler     @ 11: SVCall
    .word   Default_Handler     @ 12: DebugMonitor
    .word   0                   @ 13: reserved
    .word   Default_Handler     @ 14: PendSV
    .word   Default_Handler     @ 15: SysTick

@ Minimum Arm IMAGE_DEF (datasheet 5.9.5.1): EXE, Secure, Arm, RP2350.
    .section .image_def, "a"
    .balign 4
    .globl  __image_def
__image_def:
    .word   0xffffded3          @ PICOBIN_BLOCK_MARKER_START
    .word   0x10210142          @ IMAGE_TYPE item: EXE | SECURE | CPU Arm | CHIP RP2350
    .word   0x000001ff          @ LAST item, size 1
    .word   0x00000000          @ next block: 0 = this block only
    .word   0xab123579          @ PICOBIN_BLOCK_MARKER_END

    .text
    .thumb_func
    .globl  Reset_Handler
Reset_Handler:
    ldr     r0, =__vectors      @ our own vector table for faults
    ldr     r1, =0xe000ed08     @ SCB->VTOR
    str     r0, [r1]

    ldr     r0, =__data_load    @ copy .data's initial values from flash to RAM
    ldr     r1, =__data_start
    ldr     r2, =__data_end
1:  cmp     r1, r2
    bhs     2f
    ldr     r3, [r0], #4
    str     r3, [r1], #4
    b       1b
2:  ldr     r1, =__bss_start    @ zero .bss
    ldr     r2, =__bss_end
    movs    r3, #0
3:  cmp     r1, r2
    bhs     4f
    str     r3, [r1], #4
    b       3b
4:  bl      main
5:  wfi                         @ main never returns; if it does, sleep
    b       5b

@ A fault stops here, so a debugger shows where it happened.
    .thumb_func
    .globl  Default_Handler
Default_Handler:
    b       Default_Handler
