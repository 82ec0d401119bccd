/* Task 2 (hazard3-sim): C calls an assembly function on RV32 in QEMU. */
#include "sim.h"

int sum_array(const int *a, int n); /* sum.S */

static const int numbers[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
#define COUNT ((int)(sizeof numbers / sizeof numbers[0]))

int main(void)
{
    int sum = sum_array(numbers, COUNT);

    uart_puts("Hello from RV32!\n");
    uart_puts("sum of 1..10 = ");
    uart_putdec(sum);
    uart_puts("\n");
    return sum == 55 ? 0 : 1;
}
