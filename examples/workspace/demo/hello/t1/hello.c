#include <stdio.h>

#include "words.h"

int main(int argc, char **argv)
{
    const char *name = argc > 1 ? argv[1] : "stem";
    const char *line = argc > 2 ? argv[2] : "the quick brown fox";

    printf("Hello, %s!\n", name);
    printf("\"%s\" has %d words\n", line, count_words(line));
    return 0;
}
