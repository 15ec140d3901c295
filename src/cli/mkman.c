/* Writes memest's man page (memest.1) to stdout from the option table the
 * command itself parses with (options.h), so the page and --help cannot
 * drift apart. Run at build time (meson.build); argv[1] is the version. */
#include <stdio.h>
#include <string.h>

#include "options.h"

/* Text into roff: '-' and '\' escaped, a line break a space, nothing that
 * roff would read as a request at the start of a line. */
static void put(const char *s)
{
    if (*s == '.' || *s == '\'') fputs("\\&", stdout);
    for (; *s; s++) {
        if (*s == '-') fputs("\\-", stdout);
        else if (*s == '\\') fputs("\\e", stdout);
        else if (*s == '\n') fputc(' ', stdout);
        else fputc(*s, stdout);
    }
}

static void put_option(int o)
{
    fputs("\\fB", stdout);
    put(me_cli_options[o].name);
    fputs("\\fR", stdout);
}

int main(int argc, char **argv)
{
    const char *version = argc > 1 ? argv[1] : "";
    printf(".\\\" memest.1: written by src/cli/mkman.c from src/cli/options.h; do not edit\n");
    printf(".TH MEMEST 1 \"\" \"memest ");
    put(version);
    printf("\" \"User Commands\"\n");
    printf(".SH NAME\nmemest \\- predict a neural network's parameters, MACs and PyTorch memory from ONNX or JSON\n");
    printf(".SH SYNOPSIS\n");
    put(MEMEST_SYNOPSIS);
    printf("\n.SH DESCRIPTION\n"
           "memest reads an ONNX model or a memest JSON graph (never the weight bytes), infers its shapes and "
           "reports each layer's parameters, MACs, FLOPs and bytes moved, then the memory timeline PyTorch would "
           "allocate for an inference or a training step: its peak, what is alive there, and whether it fits a GPU.\n"
           ".PP\n"
           "An option that needs another that is not given, conflicts with another, binds nothing in the model "
           "or is given twice with two values is an error (exit 2) naming both.\n"
           ".SH OPTIONS\n");
    for (int o = 0; o < OPT_COUNT; o++) {
        const MeCliOption *op = &me_cli_options[o];
        printf(".TP\n");
        put_option(o);
        if (op->arg) {
            fputs(" \\fI", stdout);
            put(op->arg);
            fputs("\\fR", stdout);
        }
        fputc('\n', stdout);
        put(op->help);
        fputc('\n', stdout);
        if (op->needs) {
            fputs(".br\nNeeds ", stdout);
            int left = 0;
            for (int k = 0; k < OPT_COUNT; k++) left += (op->needs & OPT_BIT_OF(k)) != 0;
            for (int k = 0; k < OPT_COUNT; k++)
                if (op->needs & OPT_BIT_OF(k)) {
                    put_option(k);
                    left--;
                    fputs(!left ? ".\n" : left == 1 ? " or " : ", ", stdout);
                }
        }
        for (size_t k = 0; k < sizeof(me_cli_conflicts) / sizeof(me_cli_conflicts[0]); k++) {
            const MeCliConflict *cf = &me_cli_conflicts[k];
            if (cf->a != o && cf->b != o) continue;
            fputs(".br\nNot with ", stdout);
            put_option(cf->a == o ? cf->b : cf->a);
            fputs(": ", stdout);
            put(cf->why);
            fputs(".\n", stdout);
        }
        if (op->many) fputs(".br\nMay be given more than once.\n", stdout);
    }
    printf(".SH EXIT STATUS\n");
    put(MEMEST_EXIT_STATUS);
    printf(".\n.SH SEE ALSO\n"
           "README.md and doc/ in memest's sources: the report's columns, the conventions, the JSON graph format "
           "and how the memory timeline is simulated.\n");
    return ferror(stdout) ? 1 : 0;
}
