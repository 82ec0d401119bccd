# The same kinds of variables as in main.c, written in assembly: here you
# choose the section yourself.

    .data                       # initialised, writable
    .balign 4
    .globl  asm_word
    .type   asm_word, @object
asm_word:
    .word   0x12345678
    .size   asm_word, 4

    .section .rodata            # initialised, read-only
    .globl  asm_message
    .type   asm_message, @object
asm_message:
    .asciz  "from .S"
    .size   asm_message, . - asm_message

    .bss                        # zeroed at startup, takes no room in the file
    .balign 4
    .globl  asm_buffer
    .type   asm_buffer, @object
asm_buffer:
    .space  64
    .size   asm_buffer, 64
