/* memest: the command-line tool. Parses options, calls the library, prints. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "memest/memest.h"

enum { EXIT_OK = 0, EXIT_CHECK = 1, EXIT_BAD = 2, EXIT_UNSUPPORTED = 3 };

static void usage(FILE *f)
{
    fprintf(f,
        "usage: memest MODEL.onnx|MODEL.json [options]\n"
        "\n"
        "  --input [NAME=]SHAPE[:DTYPE]  input shape, e.g. 3x224x224 (one sample; the batch\n"
        "                                is prepended) or input_ids=8x128:int64 (full shape)\n"
        "  --batch N                     batch size (default 1)\n"
        "  --dim NAME=N                  bind a symbolic dimension\n"
        "  --convention NAME             default | torchstat | fvcore | ptflops | thop | deepspeed\n"
        "  --format NAME                 table | json | csv | markdown\n"
        "  --strict                      unknown ops are an error (exit 3)\n"
        "  --train                       simulate a training step (default: inference under no_grad)\n"
        "  --grad                        inference with autograd on (no torch.no_grad())\n"
        "  --optimizer NAME              sgd | momentum | adam | adamw | adagrad | rmsprop | none\n"
        "                                (default sgd; none: backward only, gradients kept)\n"
        "  --loss NAME                   cross-entropy | mse (default cross-entropy)\n"
        "  --runtime NAME                cuda | cpu: what PyTorch allocates inside ops (default cuda)\n"
        "  --checkpoint sqrt|N           activation checkpointing in N segments (sqrt: about sqrt(nodes));\n"
        "                                without it, JSON layers flagged \"checkpoint\" form the segments\n"
        "  --input-grad                  graph inputs require grad\n"
        "  --amp fp16|bf16               torch.autocast (fp32 weights, low-precision activations)\n"
        "  --dtype fp16|bf16             convert weights and inputs (model.half() / .bfloat16())\n"
        "  --freeze PATTERN              freeze layers whose module name matches (glob or prefix)\n"
        "  -o FILE                       write the report to FILE\n"
        "  --version, --help\n"
        "\n"
        "exit status: 0 ok, 2 bad input or usage, 3 unsupported op under --strict\n");
}

static int parse_size(const char *s, int64_t *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end || v < 1 || v > (1LL << 40)) return -1;
    *out = v;
    return 0;
}

int main(int argc, char **argv)
{
    const char *model = NULL, *outfile = NULL;
    const char **inputs = calloc((size_t)argc, sizeof(char *));
    const char **dims = calloc((size_t)argc, sizeof(char *));
    const char **freeze = calloc((size_t)argc, sizeof(char *));
    int n_freeze = 0;
    MemestLoadSettings ls = { 0 };
    MemestAnalyzeSettings as = { 0 };
    MemestMemorySettings ms = { .mode = MEMEST_RUN_INFER, .optimizer = MEMEST_OPT_SGD };
    int format = MEMEST_FORMAT_TABLE, rc = EXIT_BAD;
    MemestModel *m = NULL;
    FILE *out = stdout;
    if (!inputs || !dims || !freeze) goto end;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            rc = EXIT_OK;
            goto end;
        } else if (!strcmp(a, "--version")) {
            printf("memest %s\n", memest_version());
            rc = EXIT_OK;
            goto end;
        } else if (!strcmp(a, "--strict")) {
            as.strict = 1;
        } else if (!strcmp(a, "--train")) {
            ms.mode = MEMEST_RUN_TRAIN;
        } else if (!strcmp(a, "--amp") || !strcmp(a, "--dtype") || !strcmp(a, "--freeze")) {
            if (!val) {
                fprintf(stderr, "memest: %s needs a value\n", a);
                goto end;
            }
            i++;
            if (!strcmp(a, "--freeze")) freeze[n_freeze++] = val;
            else if (!strcmp(a, "--dtype")) ls.dtype = val;
            else if (!strcmp(val, "fp16") || !strcmp(val, "float16")) ms.amp = 1;
            else if (!strcmp(val, "bf16") || !strcmp(val, "bfloat16")) ms.amp = 2;
            else {
                fprintf(stderr, "memest: --amp '%s': expected fp16 or bf16\n", val);
                goto end;
            }
        } else if (!strcmp(a, "--input-grad")) {
            ms.input_grad = 1;
        } else if (!strcmp(a, "--checkpoint")) {
            if (!val) {
                fprintf(stderr, "memest: --checkpoint needs sqrt or a number of segments\n");
                goto end;
            }
            i++;
            int64_t segs = 0;
            if (!strcmp(val, "sqrt")) ms.checkpoint = -1;
            else if (parse_size(val, &segs) < 0 || segs < 2 || segs > 1000000) {
                fprintf(stderr, "memest: --checkpoint '%s': expected sqrt or a number of segments >= 2\n", val);
                goto end;
            } else ms.checkpoint = (int)segs;
        } else if (!strcmp(a, "--grad")) {
            if (ms.mode != MEMEST_RUN_TRAIN) ms.mode = MEMEST_RUN_INFER_GRAD;
        } else if (!strcmp(a, "--optimizer") || !strcmp(a, "--runtime") || !strcmp(a, "--loss")) {
            static const char *const opts[] = { "sgd", "momentum", "adam", "adamw", "adagrad", "rmsprop", "none", NULL };
            static const char *const rts[] = { "cuda", "cpu", NULL };
            static const char *const losses[] = { "cross-entropy", "mse", NULL };
            const char *const *names = a[2] == 'o' ? opts : a[2] == 'r' ? rts : losses;
            int k = 0;
            while (val && names[k] && strcmp(names[k], val)) k++;
            if (!val || !names[k]) {
                fprintf(stderr, "memest: %s '%s': not one of", a, val ? val : "");
                for (int j = 0; names[j]; j++) fprintf(stderr, " %s", names[j]);
                fprintf(stderr, "\n");
                goto end;
            }
            i++;
            if (a[2] == 'o') ms.optimizer = (MemestOptimizer)k;
            else if (a[2] == 'r') ms.runtime = (MemestRuntime)k;
            else ms.loss = (MemestLoss)k;
        } else if (!strcmp(a, "--input") || !strcmp(a, "--batch") || !strcmp(a, "--dim") || !strcmp(a, "--convention") ||
                   !strcmp(a, "--format") || !strcmp(a, "-o")) {
            if (!val) {
                fprintf(stderr, "memest: %s needs a value\n", a);
                goto end;
            }
            i++;
            if (!strcmp(a, "--input")) inputs[ls.n_inputs++] = val;
            else if (!strcmp(a, "--dim")) dims[ls.n_dims++] = val;
            else if (!strcmp(a, "-o")) outfile = val;
            else if (!strcmp(a, "--batch")) {
                if (parse_size(val, &ls.batch) < 0) {
                    fprintf(stderr, "memest: --batch '%s': expected a whole number from 1 to 2^40\n", val);
                    goto end;
                }
            } else if (!strcmp(a, "--convention")) {
                int c = memest_convention_from_name(val);
                if (c < 0) {
                    fprintf(stderr, "memest: --convention '%s': expected default, torchstat, fvcore, ptflops, thop or deepspeed\n", val);
                    goto end;
                }
                as.convention = (MemestConvention)c;
            } else {
                format = memest_format_from_name(val);
                if (format < 0) {
                    fprintf(stderr, "memest: --format '%s': expected table, json, csv or markdown\n", val);
                    goto end;
                }
            }
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "memest: unknown option '%s' (memest --help lists them)\n", a);
            goto end;
        } else if (model) {
            fprintf(stderr, "memest: more than one model given ('%s' and '%s')\n", model, a);
            goto end;
        } else {
            model = a;
        }
    }
    if (!model) {
        usage(stderr);
        goto end;
    }
    ls.inputs = inputs;
    ls.dims = dims;
    char err[1024];
    if (memest_model_load(&m, model, &ls, err, sizeof(err)) < 0) {
        fprintf(stderr, "memest: %s\n", err);
        goto end;
    }
    for (int k = 0; k < n_freeze; k++)
        if (memest_freeze(m, freeze[k]) == 0) {
            fprintf(stderr, "memest: --freeze '%s': no layer's module name matches\n", freeze[k]);
            goto end;
        }
    int r = memest_analyze(m, &as, err, sizeof(err));
    if (r < 0) {
        fprintf(stderr, "memest: %s\n", err);
        rc = r == MEMEST_ERR_UNSUPPORTED ? EXIT_UNSUPPORTED : EXIT_BAD;
        goto end;
    }
    if (outfile && !(out = fopen(outfile, "w"))) {
        fprintf(stderr, "memest: -o %s: %s\n", outfile, strerror(errno));
        out = stdout;
        goto end;
    }
    if (memest_set_memory(m, &ms, err, sizeof(err)) < 0) {
        fprintf(stderr, "memest: %s\n", err);
        goto end;
    }
    if (memest_report(m, (MemestFormat)format, out) < 0 || fflush(out) != 0 || ferror(out)) {
        fprintf(stderr, "memest: could not write the report\n");
        goto end;
    }
    rc = EXIT_OK;
end:
    if (out != stdout) fclose(out);
    memest_model_free(&m);
    free(inputs);
    free(dims);
    free(freeze);
    return rc;
}
