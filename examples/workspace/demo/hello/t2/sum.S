# int sum_array(const int *a, int n): the sum of a[0..n-1].
# RV32 calling convention: arguments in a0, a1; result in a0.

    .text
    .globl  sum_array
    .type   sum_array, @function
sum_array:
    li      t0, 0               # t0 = running sum
1:  blez    a1, 2f              # no elements left?
    lw      t1, 0(a0)           # t1 = *a
    add     t0, t0, t1
    addi    a0, a0, 4           # a++
    addi    a1, a1, -1          # n--
    j       1b
2:  mv      a0, t0
    ret
    .size   sum_array, . - sum_array
