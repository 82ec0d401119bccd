/* Task 3 (rp2350): one program, two CPUs. The same C source blinks the
 * Pico 2's LED whether it is built for the Hazard3 cores (TARGET=rp2350-rv)
 * or for the Cortex-M33 cores (TARGET=rp2350-arm); only the startup code
 * and the linker script differ. */
#include "rp2350.h"

/* Three short blinks and one long one; units of DELAY_UNIT loop turns. */
static const uint8_t pattern[] = {1, 1, 1, 3};
#define DELAY_UNIT 300000u

/* .data and .bss, so the startup code has something to copy and to zero;
 * in gdb: watch blinks, p cycles. */
uint32_t cycles = 0;
uint32_t blinks_per_cycle = sizeof pattern;
uint32_t blinks;

static void delay(uint32_t turns)
{
    while (turns--)
        __asm__ volatile("" ::: "memory"); /* keep the loop */
}

static void led_init(uint32_t pin)
{
    uint32_t both = RESETS_IO_BANK0 | RESETS_PADS_BANK0;

    REG(RESETS_RESET + ALIAS_CLR) = both;               /* take GPIO out of reset */
    while ((REG(RESETS_RESET_DONE) & both) != both)
        ;
    REG(SIO_GPIO_OUT_CLR) = 1u << pin;
    REG(SIO_GPIO_OE_SET) = 1u << pin;
    REG(PADS_GPIO(pin)) = (REG(PADS_GPIO(pin)) & ~PADS_OD) | PADS_IE;
    REG(GPIO_CTRL(pin)) = GPIO_FUNC_SIO;                 /* the pin follows SIO */
    REG(PADS_GPIO(pin) + ALIAS_CLR) = PADS_ISO;          /* and is connected last */
}

int main(void)
{
    led_init(LED_PIN);
    for (;;) {
        for (uint32_t i = 0; i < blinks_per_cycle; i++) {
            REG(SIO_GPIO_OUT_SET) = 1u << LED_PIN;
            delay(pattern[i] * DELAY_UNIT);
            REG(SIO_GPIO_OUT_CLR) = 1u << LED_PIN;
            delay(DELAY_UNIT);
            blinks++;
        }
        cycles++;
        delay(4 * DELAY_UNIT);
    }
}
