# int asm_count(int step)
#     asm_counter += step;
#     asm_history[asm_calls % 8] = asm_counter;
#     asm_calls++;
#     return asm_counter;
#
# Its state lives in sections this file chooses: asm_counter starts at 100
# (.data), the history and the call count start at 0 (.bss).

    .data
    .balign 4
    .globl  asm_counter
    .type   asm_counter, @object
    .size   asm_counter, 4
asm_counter:
    .word   100

    .bss
    .balign 4
    .globl  asm_history
    .type   asm_history, @object
    .size   asm_history, 32
asm_history:
    .space  32                  # 8 words
    .globl  asm_calls
    .type   asm_calls, @object
    .size   asm_calls, 4
asm_calls:
    .space  4

    .text
    .globl  asm_count
    .type   asm_count, @function
asm_count:
    la      t0, asm_counter
    lw      t1, 0(t0)
    add     t1, t1, a0          # asm_counter + step
    sw      t1, 0(t0)

    la      t2, asm_calls
    lw      t3, 0(t2)           # t3 = asm_calls
    andi    t4, t3, 7           # slot = asm_calls % 8
    slli    t4, t4, 2           # byte offset = slot * 4
    la      t5, asm_history
    add     t5, t5, t4
    sw      t1, 0(t5)           # asm_history[slot] = asm_counter

    addi    t3, t3, 1
    sw      t3, 0(t2)           # asm_calls++
    mv      a0, t1
    ret
    .size   asm_count, . - asm_count
