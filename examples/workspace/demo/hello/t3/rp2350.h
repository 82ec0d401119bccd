/* The few RP2350 registers this program touches (RP2350 datasheet:
 * 2.2 address map, 7.5 resets, 9.11 IO_BANK0 / PADS_BANK0, 3.1 SIO).
 * The same addresses serve both the Hazard3 (RISC-V) and the Cortex-M33 cores. */
#ifndef RP2350_H
#define RP2350_H

#include <stdint.h>

#define REG(addr) (*(volatile uint32_t *)(uintptr_t)(addr))

/* Every peripheral register has atomic aliases: +0x2000 sets bits, +0x3000 clears bits. */
#define ALIAS_SET 0x2000u
#define ALIAS_CLR 0x3000u

#define RESETS_BASE        0x40020000u
#define RESETS_RESET       (RESETS_BASE + 0x0u)
#define RESETS_RESET_DONE  (RESETS_BASE + 0x8u)
#define RESETS_IO_BANK0    (1u << 6)
#define RESETS_PADS_BANK0  (1u << 9)

#define IO_BANK0_BASE      0x40028000u
#define GPIO_CTRL(n)       (IO_BANK0_BASE + 0x004u + 8u * (n))
#define GPIO_FUNC_SIO      5u

#define PADS_BANK0_BASE    0x40038000u
#define PADS_GPIO(n)       (PADS_BANK0_BASE + 0x004u + 4u * (n))
#define PADS_IE            (1u << 6)   /* input enable */
#define PADS_OD            (1u << 7)   /* output disable */
#define PADS_ISO           (1u << 8)   /* pad isolation, set at reset on RP2350 */

#define SIO_BASE           0xd0000000u
#define SIO_GPIO_OUT_SET   (SIO_BASE + 0x018u)
#define SIO_GPIO_OUT_CLR   (SIO_BASE + 0x020u)
#define SIO_GPIO_OE_SET    (SIO_BASE + 0x038u)

/* The LED of the Pico 2 (on the Pico 2 W the LED hangs off the wireless chip instead). */
#define LED_PIN 25u

#endif
