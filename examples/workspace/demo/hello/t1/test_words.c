/* Unit tests for count_words. make test builds and runs them. */
#include <stdio.h>

#include "words.h"

static int failures;

static void check(const char *s, int want)
{
    int got = count_words(s);
    if (got != want) {
        printf("FAIL count_words(\"%s\") = %d, want %d\n", s, got, want);
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
#ifdef TODO
    /* Task 1: these pass once tabs and newlines separate words. */
    check("tab\tseparated", 2);
    check("two\nlines", 2);
#endif
    if (failures) {
        printf("%d check(s) failed\n", failures);
        return 1;
    }
    printf("all checks passed\n");
    return 0;
}
