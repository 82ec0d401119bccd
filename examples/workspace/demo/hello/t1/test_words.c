/* Unit tests for count_words. make test builds and runs them. */
#include <stdio.h>

#include "words.h"

static int failures;

/* show prints s with tabs and newlines as C escapes, so a failing check
 * reads as it was written. */
static void show(const char *s)
{
    for (; *s != '\0'; s++) {
        if (*s == '\t')
            fputs("\\t", stdout);
        else if (*s == '\n')
            fputs("\\n", stdout);
        else
            putchar(*s);
    }
}

static void check(const char *s, int want)
{
    int got = count_words(s);
    if (got != want) {
        fputs("FAIL count_words(\"", stdout);
        show(s);
        printf("\") = %d, want %d\n", got, want);
        failures++;
    }
}

int main(void)
{
    check("", 0);
    check("one", 1);
    check("two words", 2);
    check("  leading and trailing  ", 3);
    check("many   spaces   between", 3);
    /* Task 1: these fail until tabs and newlines separate words. */
    check("tab\tseparated", 2);
    check("two\nlines", 2);
    if (failures) {
        printf("%d check(s) failed\n", failures);
        return 1;
    }
    printf("all checks passed\n");
    return 0;
}
