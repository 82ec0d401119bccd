#include "sim.h"

#define UART_BASE      0x10000000u
#define UART_THR       0               /* transmit holding register */
#define UART_LSR       5               /* line status register */
#define UART_LSR_THRE  0x20            /* THR empty */
#define FINISHER_BASE  0x00100000u
#define FINISHER_PASS  0x5555u
#define FINISHER_FAIL  0x3333u

static volatile unsigned char *const uart = (volatile unsigned char *)UART_BASE;
static volatile unsigned int *const finisher = (volatile unsigned int *)FINISHER_BASE;

void uart_putc(char c)
{
    while ((uart[UART_LSR] & UART_LSR_THRE) == 0)
        ;
    uart[UART_THR] = (unsigned char)c;
}

void uart_puts(const char *s)
{
    while (*s)
        uart_putc(*s++);
}

void uart_putdec(int v)
{
    char buf[12];
    int i = 0;
    unsigned u = v < 0 ? 0u - (unsigned)v : (unsigned)v;

    if (v < 0)
        uart_putc('-');
    do {
        buf[i++] = (char)('0' + u % 10);
        u /= 10;
    } while (u != 0);
    while (i > 0)
        uart_putc(buf[--i]);
}

void uart_puthex(unsigned v)
{
    uart_puts("0x");
    for (int shift = 28; shift >= 0; shift -= 4)
        uart_putc("0123456789abcdef"[(v >> shift) & 0xf]);
}

void sim_exit(int code)
{
    if (code == 0)
        *finisher = FINISHER_PASS;
    else
        *finisher = ((unsigned)code << 16) | FINISHER_FAIL;
    for (;;)
        ;
}

/* Called from trap_entry in start.S. */
void trap_report(unsigned mcause, unsigned mepc, unsigned mtval)
{
    uart_puts("\ntrap: mcause=");
    uart_puthex(mcause);
    uart_puts(" mepc=");
    uart_puthex(mepc);
    uart_puts(" mtval=");
    uart_puthex(mtval);
    uart_puts("\n");
    sim_exit(99);
}
