/* The C tests' assertion: counts the checks, prints each failure with its
 * place and goes on, so one run reports every broken expectation. */
#ifndef MEMEST_TESTS_CHECK_H
#define MEMEST_TESTS_CHECK_H

#include <stdio.h>

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

#endif
