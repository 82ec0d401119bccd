#ifndef SIM_H
#define SIM_H

/* Devices of QEMU's virt machine (not of a real Hazard3 board):
 *   0x10000000  NS16550A UART, transmit holding register at offset 0
 *   0x00100000  test finisher: 0x5555 ends QEMU with status 0,
 *               (code << 16) | 0x3333 ends it with status code. */

void uart_putc(char c);
void uart_puts(const char *s);
void uart_putdec(int v);
void uart_puthex(unsigned v);
void sim_exit(int code) __attribute__((noreturn));

#endif
