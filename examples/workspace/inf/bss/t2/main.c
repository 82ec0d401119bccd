/* Task 2: every global here without an initialiser is in .bss, so it is 0
 * only if start.S zeroed it. The program checks them and fails otherwise. */
#include "sim.h"
#include "sections.h"

int counter;              /* .bss (small: GCC puts it in .sbss) */
static int histogram[32]; /* .bss */
char name[16];            /* .bss */
int answer = 42;          /* .data: the loop must not touch it */

/* check reports one variable; it returns 1 when it is not zero. */
static int check(const char *what, int nonzero)
{
    uart_puts(what);
    uart_puts(nonzero ? ": NOT zero\n" : ": zero\n");
    return nonzero;
}

int main(void)
{
    int failures = 0; /* a local: on the stack, not in .bss */
    int dirty = 0;

    failures += check("counter", counter != 0);
    for (int i = 0; i < 32; i++)
        dirty |= histogram[i] != 0;
    failures += check("histogram[0..31]", dirty);
    dirty = 0;
    for (int i = 0; i < 16; i++)
        dirty |= name[i] != 0;
    failures += check("name[0..15]", dirty);

    uart_puts("answer = ");
    uart_putdec(answer);
    uart_puts(answer == 42 ? "\n" : "  WRONG: the loop wrote past .bss?\n");
    failures += answer != 42;

    /* Use them, now that they start from a known state. */
    for (int i = 0; i < 100; i++)
        histogram[(i * 7) % 32]++;
    counter = histogram[0] + histogram[31];
    uart_puts("counter after use = ");
    uart_putdec(counter);
    uart_puts("\n");

    uart_puts(failures ? "FAIL\n" : ".bss was zeroed\n");
    return failures;
}
