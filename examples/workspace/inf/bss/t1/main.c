/* Task 1: where do initialised globals live?
 *
 * Each global below lands in .data, .bss or .rodata. The program asks the
 * linker's section boundaries (common/sections.h) where each one is, and
 * checks its value. Predict the section before you run it (README.md). */
#include "sim.h"
#include "sections.h"

int counter = 42;                        /* initialised */
int table[8] = {1, 2, 3, 4, 5, 6, 7, 8}; /* initialised array */
int zeroed;                              /* no initialiser */
int explicitly_zero = 0;                 /* initialised ... to zero */
static int big_zero[64];                 /* static, no initialiser */
const int limit = 1000;                  /* const */
const char greeting[] = "czesc";         /* const array */
char *message = "pointer to a literal";  /* the pointer, not the literal */

extern int asm_word;                     /* globals.S */
extern const char asm_message[];
extern int asm_buffer[16];

static int failures;

/* where prints "name  section  " in columns. */
static void where(const char *name, const void *addr)
{
    int n = 0;
    uart_puts(name);
    while (name[n] != '\0')
        n++;
    for (; n < 18; n++)
        uart_putc(' ');
    uart_puts(section_of(addr));
    uart_puts("\t");
}

static void show_int(const char *name, const void *addr, int value, int want)
{
    where(name, addr);
    uart_putdec(value);
    if (value != want) {
        uart_puts("  WRONG, want ");
        uart_putdec(want);
        failures++;
    }
    uart_puts("\n");
}

static void show_str(const char *name, const void *addr, const char *value, const char *want)
{
    const char *a = value, *b = want;
    where(name, addr);
    uart_puts("\"");
    uart_puts(value);
    uart_puts("\"");
    while (*a != '\0' && *a == *b)
        a++, b++;
    if (*a != *b) {
        uart_puts("  WRONG, want \"");
        uart_puts(want);
        uart_puts("\"");
        failures++;
    }
    uart_puts("\n");
}

static int sum(const int *a, int n)
{
    int s = 0;
    for (int i = 0; i < n; i++)
        s += a[i];
    return s;
}

int main(void)
{
    static int calls = 7; /* a static local: where does it go? */

    uart_puts("variable          section\tvalue\n");
    show_int("counter", &counter, counter, 42);
    show_int("table (sum)", table, sum(table, 8), 36);
    show_int("zeroed", &zeroed, zeroed, 0);
    show_int("explicitly_zero", &explicitly_zero, explicitly_zero, 0);
    show_int("big_zero (sum)", big_zero, sum(big_zero, 64), 0);
    show_int("limit", &limit, limit, 1000);
    show_str("greeting", greeting, greeting, "czesc");
    show_str("message", &message, message, "pointer to a literal");
    show_str("*message", message, message, "pointer to a literal");
    show_int("calls", &calls, calls, 7);
    show_int("asm_word", &asm_word, asm_word, 0x12345678);
    show_str("asm_message", asm_message, asm_message, "from .S");
    show_int("asm_buffer (sum)", asm_buffer, sum(asm_buffer, 16), 0);
    return failures;
}
