/* Task 3: these initialised globals have the right values only if start.S
 * copied .data from ROM to RAM. */
#include "sim.h"
#include "sections.h"

struct point {
    int x, y;
};

int answer = 42;
char greeting[] = "czesc z RAM";
int primes[5] = {2, 3, 5, 7, 11};
struct point origin = {3, 4};
int visits;          /* .bss, for comparison */

static int same(const char *a, const char *b)
{
    while (*a != '\0' && *a == *b)
        a++, b++;
    return *a == *b;
}

int main(void)
{
    int failures = 0;
    int sum = 0;

    uart_puts(".data runs at ");
    uart_puthex((unsigned)__data_start);
    uart_puts((unsigned)__data_load != (unsigned)__data_start ? ", loaded elsewhere\n" : ", loaded there too\n");
    /* __data_start is the start of RAM (link.ld); __data_load moves with
     * the size of the code, so the output only says whether they differ. */

    uart_puts("answer = ");
    uart_putdec(answer);
    uart_puts("\n");
    failures += answer != 42;

    uart_puts("greeting = ");
    uart_puts(greeting);
    uart_puts("\n");
    failures += !same(greeting, "czesc z RAM");

    for (int i = 0; i < 5; i++)
        sum += primes[i];
    uart_puts("sum of primes = ");
    uart_putdec(sum);
    uart_puts("\n");
    failures += sum != 28;

    uart_puts("origin = (");
    uart_putdec(origin.x);
    uart_puts(", ");
    uart_putdec(origin.y);
    uart_puts(")\n");
    failures += origin.x != 3 || origin.y != 4;

    /* .data is writable: that is why it has to be in RAM. */
    answer++;
    greeting[0] = 'C';
    visits++;
    uart_puts("after writing: answer = ");
    uart_putdec(answer);
    uart_puts(", greeting = ");
    uart_puts(greeting);
    uart_puts(", visits = ");
    uart_putdec(visits);
    uart_puts("\n");

    uart_puts(failures ? "FAIL\n" : ".data was copied\n");
    return failures;
}
