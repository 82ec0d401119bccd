/* Task 4: C calls asm_count (counter.S) and reads the assembly's globals.
 * Run it, then look at the same variables in gdb (README.md). */
#include "sim.h"
#include "sections.h"

int asm_count(int step);        /* counter.S */
extern int asm_counter;         /* .data in counter.S */
extern int asm_history[8];      /* .bss in counter.S */
extern unsigned asm_calls;      /* .bss in counter.S */

int steps[] = {1, 2, 3, 4, 5};  /* .data */
int total;                      /* .bss */
const char title[] = "asm_count"; /* .rodata */

static void show(const char *name, const void *addr, int value)
{
    uart_puts(name);
    uart_puts(" (");
    uart_puts(section_of(addr));
    uart_puts(") = ");
    uart_putdec(value);
    uart_puts("\n");
}

int main(void)
{
    uart_puts(title);
    uart_puts("\n");
    for (int i = 0; i < 5; i++)
        total = asm_count(steps[i]);

    show("total", &total, total);
    show("asm_counter", &asm_counter, asm_counter);
    show("asm_calls", &asm_calls, (int)asm_calls);
    uart_puts("asm_history:");
    for (int i = 0; i < 8; i++) {
        uart_puts(" ");
        uart_putdec(asm_history[i]);
    }
    uart_puts("\n");
    return total == 115 && asm_counter == 115 && asm_calls == 5 ? 0 : 1;
}
