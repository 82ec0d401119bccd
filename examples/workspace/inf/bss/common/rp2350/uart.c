/* sim.h for the RP2350 (TARGET=rp2350-rv): what ../sim.c does for QEMU,
 * on the Pico 2's UART0 (GPIO 0 = TX, GPIO 1 = RX, 115200 8N1). There is no
 * test finisher on a board: sim_exit stops the core instead.
 *
 * Only compiled and linked here; nobody has run it on a board (see the
 * task's README.md). */
#include "rp2350.h"
#include "sim.h"

static void pad_to_uart(uint32_t pin)
{
    REG(PADS_GPIO(pin)) = (REG(PADS_GPIO(pin)) & ~PADS_OD) | PADS_IE;
    REG(GPIO_CTRL(pin)) = GPIO_FUNC_UART;
    REG(PADS_GPIO(pin) + ALIAS_CLR) = PADS_ISO; /* connect the pad last */
}

/* Called by start-rv.S before main. clk_peri runs from the 12 MHz crystal,
 * so the baud rate does not depend on the ring oscillator the bootrom
 * leaves clk_sys on. */
void uart_init(void)
{
    uint32_t blocks = RESETS_IO_BANK0 | RESETS_PADS_BANK0 | RESETS_UART0;

    REG(XOSC_STARTUP) = 47;                     /* ~1 ms at 12 MHz, in units of 256 cycles */
    REG(XOSC_CTRL) = XOSC_RANGE_1_15MHZ | XOSC_ENABLE;
    while ((REG(XOSC_STATUS) & XOSC_STABLE) == 0)
        ;
    REG(CLK_PERI_CTRL) = 0;                     /* stop before switching source */
    REG(CLK_PERI_CTRL) = CLK_PERI_AUX_XOSC | CLK_PERI_ENABLE;

    REG(RESETS_RESET + ALIAS_CLR) = blocks;
    while ((REG(RESETS_RESET_DONE) & blocks) != blocks)
        ;

    /* divisor = 12 MHz / (16 * 115200) = 6.51: integer 6, fraction 33/64 */
    uint32_t div = 8u * XOSC_HZ / UART_BAUD;
    REG(UART_IBRD) = div >> 7;
    REG(UART_FBRD) = ((div & 0x7fu) + 1u) / 2u;
    REG(UART_LCR_H) = UART_LCR_H_8BIT | UART_LCR_H_FEN; /* also latches the divisor */
    REG(UART_CR) = UART_CR_UARTEN | UART_CR_TXE | UART_CR_RXE;

    pad_to_uart(UART_TX_PIN);
    pad_to_uart(UART_RX_PIN);
}

void uart_putc(char c)
{
    if (c == '\n')
        uart_putc('\r');                        /* a serial terminal wants CR LF */
    while (REG(UART_FR) & UART_FR_TXFF)
        ;
    REG(UART_DR) = (unsigned char)c;
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

/* Nothing to end on a board: let the UART drain, then sleep. main's return
 * value is code here (in gdb: p code). */
void sim_exit(int code)
{
    (void)code;
    while (REG(UART_FR) & UART_FR_BUSY)
        ;
    for (;;)
        __asm__ volatile("wfi");
}

/* Called from trap_entry in ../trap.S. */
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

/* The compiler may call these for struct copies and large initialisers
 * even in freestanding code; there is no C library here. */
void *memset(void *d, int c, unsigned long n)
{
    unsigned char *p = d;
    while (n--)
        *p++ = (unsigned char)c;
    return d;
}

void *memcpy(void *d, const void *s, unsigned long n)
{
    unsigned char *p = d;
    const unsigned char *q = s;
    while (n--)
        *p++ = *q++;
    return d;
}
