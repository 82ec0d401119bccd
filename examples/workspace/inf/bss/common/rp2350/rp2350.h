/* The few RP2350 registers uart.c touches (RP2350 datasheet: 2.2 address
 * map, 7.5 resets, 8.1 clocks, 8.2 XOSC, 9.11 IO_BANK0 / PADS_BANK0,
 * 12.1 UART). */
#ifndef RP2350_H
#define RP2350_H

#include <stdint.h>

#define REG(addr) (*(volatile uint32_t *)(uintptr_t)(addr))

/* Every peripheral register has atomic aliases: +0x2000 sets bits, +0x3000 clears bits. */
#define ALIAS_SET 0x2000u
#define ALIAS_CLR 0x3000u

#define CLOCKS_BASE        0x40010000u
#define CLK_PERI_CTRL      (CLOCKS_BASE + 0x48u)
#define CLK_PERI_ENABLE    (1u << 11)
#define CLK_PERI_AUX_XOSC  (4u << 5)   /* AUXSRC = xosc_clksrc */

#define RESETS_BASE        0x40020000u
#define RESETS_RESET       (RESETS_BASE + 0x0u)
#define RESETS_RESET_DONE  (RESETS_BASE + 0x8u)
#define RESETS_IO_BANK0    (1u << 6)
#define RESETS_PADS_BANK0  (1u << 9)
#define RESETS_UART0       (1u << 26)

#define IO_BANK0_BASE      0x40028000u
#define GPIO_CTRL(n)       (IO_BANK0_BASE + 0x004u + 8u * (n))
#define GPIO_FUNC_UART     2u

#define PADS_BANK0_BASE    0x40038000u
#define PADS_GPIO(n)       (PADS_BANK0_BASE + 0x004u + 4u * (n))
#define PADS_IE            (1u << 6)   /* input enable */
#define PADS_OD            (1u << 7)   /* output disable */
#define PADS_ISO           (1u << 8)   /* pad isolation, set at reset on RP2350 */

/* The crystal oscillator: 12 MHz on a Pico 2. */
#define XOSC_BASE          0x40048000u
#define XOSC_CTRL          (XOSC_BASE + 0x00u)
#define XOSC_STATUS        (XOSC_BASE + 0x04u)
#define XOSC_STARTUP       (XOSC_BASE + 0x0cu)
#define XOSC_RANGE_1_15MHZ 0xaa0u
#define XOSC_ENABLE        (0xfabu << 12)
#define XOSC_STABLE        (1u << 31)
#define XOSC_HZ            12000000u

/* UART0, an Arm PL011. */
#define UART0_BASE         0x40070000u
#define UART_DR            (UART0_BASE + 0x00u)
#define UART_FR            (UART0_BASE + 0x18u)
#define UART_FR_BUSY       (1u << 3)
#define UART_FR_TXFF       (1u << 5)   /* transmit FIFO full */
#define UART_IBRD          (UART0_BASE + 0x24u)
#define UART_FBRD          (UART0_BASE + 0x28u)
#define UART_LCR_H         (UART0_BASE + 0x2cu)
#define UART_LCR_H_8BIT    (3u << 5)
#define UART_LCR_H_FEN     (1u << 4)
#define UART_CR            (UART0_BASE + 0x30u)
#define UART_CR_UARTEN     (1u << 0)
#define UART_CR_TXE        (1u << 8)
#define UART_CR_RXE        (1u << 9)

/* The Pico 2's default UART0 pins (also wired to the Debug Probe's UART). */
#define UART_TX_PIN        0u
#define UART_RX_PIN        1u
#define UART_BAUD          115200u

#endif
