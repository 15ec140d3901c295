/* The C tests' assertion: counts the checks, prints each failure with its
 * place and goes on, so one run reports every broken expectation. */
#ifndef MEMEST_TESTS_CHECK_H
#define MEMEST_TESTS_CHECK_H

#include <stdio.h>
#include <stdlib.h>

static int fails, checks;

#define CHECK(cond, ...)                                   \
    do {                                                   \
        checks++;                                          \
        if (!(cond)) {                                     \
            printf("FAIL %s:%d: ", __FILE__, __LINE__);    \
            printf(__VA_ARGS__);                           \
            printf("\n");                                  \
            fails++;                                       \
        }                                                  \
    } while (0)

/* A whole file, NUL-terminated (len: its size, when given); NULL if unreadable. */
static inline char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        n += fread(buf + n, 1, cap - n - 1, f);
        if (n + 1 < cap) break;
        char *nb = realloc(buf, cap *= 2);
        if (!nb) free(buf);
        buf = nb;
    }
    fclose(f);
    if (buf) buf[n] = 0;
    if (len) *len = n;
    return buf;
}

#endif
