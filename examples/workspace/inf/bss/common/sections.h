/* Addresses the linker script defines. Declared as arrays: only their
 * addresses mean anything, there is no object behind them. */
#ifndef SECTIONS_H
#define SECTIONS_H

extern char __rodata_start[], __rodata_end[];
extern char __data_start[], __data_end[], __data_load[];
extern char __bss_start[], __bss_end[];

/* section_of names the output section that holds address p. */
static inline const char *section_of(const void *p)
{
    const char *a = p;
    if (a >= __rodata_start && a < __rodata_end)
        return ".rodata";
    if (a >= __data_start && a < __data_end)
        return ".data";
    if (a >= __bss_start && a < __bss_end)
        return ".bss";
    return "?";
}

#endif
