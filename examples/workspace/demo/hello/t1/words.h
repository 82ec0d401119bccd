#ifndef WORDS_H
#define WORDS_H

/* count_words returns how many words s holds. A word is a run of
 * characters that are not separators. */
int count_words(const char *s);

#endif
