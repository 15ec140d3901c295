/* memest: the command-line tool. Parses options, calls the library, prints. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <unistd.h>

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
        "  --checkpoint sqrt|N           activation checkpointing in N segments (sqrt: sqrt of the chain's\n"
        "                                layers, the places a single tensor crosses);\n"
        "                                without it, JSON layers flagged \"checkpoint\" form the segments\n"
        "  --input-grad                  graph inputs require grad\n"
        "  --amp fp16|bf16               torch.autocast (fp32 weights, low-precision activations)\n"
        "  --dtype fp16|bf16             convert weights and inputs (model.half() / .bfloat16())\n"
        "  --freeze PATTERN              freeze layers whose module name matches (glob or prefix)\n"
        "  --gpu NAME | --gpu-mem SIZE   a GPU: fits or not, headroom, roofline time (--list-gpus)\n"
        "  --gpu-file FILE               more GPUs (JSON list)\n"
        "  --device-profile FILE         a GPU as memest-measure --calibrate measured it (doc/device-profile.md)\n"
        "  --max-batch                   the largest batch that fits on the GPU\n"
        "  --gpus N --shard S            data parallel: ddp | zero1 | zero2 | zero3 (fsdp); memory per GPU\n"
        "  --plot FILE.svg               memory timeline; --netron FILE: Netron metrics attachment\n"
        "  --check GOLDEN [--tolerance PCT] | --update-golden FILE   CI golden checks (exit 1 if moved)\n"
        "  -o FILE                       write the report to FILE\n"
        "  --version, --help\n"
        "\n"
        "exit status: 0 ok, 1 golden check failed, 2 bad input or usage, 3 unsupported op under --strict\n");
}

static void list_gpus(void)
{
    int n;
    const MemestGpu *t = memest_gpu_table(&n);
    printf("%-12s %10s %10s %10s %12s %5s\n", "gpu", "memory", "GB/s", "FP32 TF/s", "FP16/BF16 TF/s", "SMs");
    for (int i = 0; i < n; i++)
        printf("%-12s %6.2f GiB %10.0f %10.1f %12.1f %5d\n", t[i].name, (double)t[i].memory / (1u << 30), t[i].bandwidth / 1e9,
               t[i].fp32_flops / 1e12, t[i].fp16_flops / 1e12, t[i].sms);
}

/* A terminal sees progress; a pipe or a file stays clean. */
static void progress(void *opaque, int64_t batch, uint64_t need)
{
    (void)opaque;
    if (isatty(2)) fprintf(stderr, "\rmemest: batch %lld needs %.2f MiB   ", (long long)batch, (double)need / (1 << 20));
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
    MemestLoadSettings ls;
    MemestAnalyzeSettings as;
    MemestMemorySettings ms;
    memest_load_default_settings(&ls);
    memest_analyze_default_settings(&as);
    memest_memory_default_settings(&ms);
    ls.threads = 1; /* a big graph loads and simulates faster with a helper thread */
    const MemestGpu *gpu = NULL;
    MemestGpu named;            /* --gpu */
    MemestGpu *user_gpus = NULL; /* --gpu-file */
    int n_user_gpus = 0;
    MemestGpu custom = { .name = "custom" };
    MemestGpu profiled = { .name = "profiled" };
    const char *plot = NULL, *netron = NULL, *check = NULL, *update = NULL;
    double tolerance = 1.0;
    int max_batch = 0;
    int format = MEMEST_FORMAT_TABLE, rc = EXIT_BAD;
    MemestModel *m = NULL;
    MemestAnalysis *an = NULL;
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
        } else if (!strcmp(a, "--list-gpus")) {
            list_gpus();
            rc = EXIT_OK;
            goto end;
        } else if (!strcmp(a, "--max-batch")) {
            max_batch = 1;
        } else if (!strcmp(a, "--device-profile")) {
            if (!val) {
                fprintf(stderr, "memest: --device-profile needs a file\n");
                goto end;
            }
            i++;
            char e2[512];
            MemestDeviceProfile prof;
            if (memest_device_profile_load(val, &prof, e2, sizeof(e2)) < 0) {
                fprintf(stderr, "memest: --device-profile: %s\n", e2);
                goto end;
            }
            /* measured on the device: they replace the table and the estimates */
            profiled = prof.gpu;
            gpu = &profiled;
            ms.cuda_context = prof.cuda_context_bytes;
            if (prof.cublas_workspace_bytes) ms.cublas_workspace = prof.cublas_workspace_bytes;
        } else if (!strcmp(a, "--gpu") || !strcmp(a, "--gpu-mem") || !strcmp(a, "--gpu-file") || !strcmp(a, "--gpus") ||
                   !strcmp(a, "--shard") || !strcmp(a, "--plot") || !strcmp(a, "--netron") || !strcmp(a, "--check") ||
                   !strcmp(a, "--update-golden") || !strcmp(a, "--tolerance")) {
            if (!val) {
                fprintf(stderr, "memest: %s needs a value\n", a);
                goto end;
            }
            i++;
            if (!strcmp(a, "--gpu")) {
                if (memest_gpu_find(val, user_gpus, n_user_gpus, &named) < 0) {
                    fprintf(stderr, "memest: --gpu '%s': not a known GPU (memest --list-gpus; --gpu-mem SIZE for others)\n", val);
                    goto end;
                }
                gpu = &named;
            } else if (!strcmp(a, "--gpu-mem")) {
                if (!(custom.memory = memest_parse_size(val))) {
                    fprintf(stderr, "memest: --gpu-mem '%s': expected a size like 24GiB, 16GB or 81920MiB\n", val);
                    goto end;
                }
            } else if (!strcmp(a, "--gpu-file")) {
                char e2[512];
                if (memest_gpu_load_file(val, &user_gpus, &n_user_gpus, e2, sizeof(e2)) < 0) {
                    fprintf(stderr, "memest: --gpu-file: %s\n", e2);
                    goto end;
                }
            } else if (!strcmp(a, "--gpus")) {
                int64_t g;
                if (parse_size(val, &g) < 0 || g > 65536) {
                    fprintf(stderr, "memest: --gpus '%s': expected a number of GPUs\n", val);
                    goto end;
                }
                ms.gpus = (int)g;
            } else if (!strcmp(a, "--shard")) {
                static const char *const sh[] = { "ddp", "zero1", "zero2", "zero3", NULL };
                int k = 0;
                while (sh[k] && strcmp(sh[k], val)) k++;
                if (!strcmp(val, "fsdp")) k = MEMEST_SHARD_ZERO3;
                else if (!sh[k]) {
                    fprintf(stderr, "memest: --shard '%s': expected ddp, zero1, zero2, zero3 or fsdp\n", val);
                    goto end;
                }
                ms.shard = k;
            } else if (!strcmp(a, "--tolerance")) {
                char *e;
                tolerance = strtod(val, &e);
                if (*e || !(tolerance >= 0) || tolerance > 1e6) {
                    fprintf(stderr, "memest: --tolerance '%s': expected a percentage\n", val);
                    goto end;
                }
            } else if (!strcmp(a, "--plot")) plot = val;
            else if (!strcmp(a, "--netron")) netron = val;
            else if (!strcmp(a, "--check")) check = val;
            else update = val;
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
    if (custom.memory) {
        /* --gpu-mem: a card of that size, with the named GPU's speeds if any */
        if (gpu) {
            uint64_t mem = custom.memory;
            custom = *gpu;
            custom.memory = mem;
        }
        gpu = &custom;
    }
    if (gpu) {
        if (!ms.cuda_context) ms.cuda_context = memest_gpu_context(gpu);
        /* cuBLAS takes a 32 MiB workspace on Hopper and later */
        if (!ms.cublas_workspace && (!strncmp(gpu->name, "h100", 4) || !strncmp(gpu->name, "h200", 4) || !strncmp(gpu->name, "b200", 4)))
            ms.cublas_workspace = UINT64_C(32) << 20;
    }
    if (ms.gpus > 1 && ms.mode != MEMEST_RUN_TRAIN)
        fprintf(stderr, "memest: note: --gpus shards training state; inference keeps a whole model per GPU\n");
    if (max_batch && !gpu) {
        fprintf(stderr, "memest: --max-batch needs --gpu NAME or --gpu-mem SIZE\n");
        goto end;
    }
    if (memest_model_load(&m, model, &ls, err, sizeof(err)) < 0) {
        fprintf(stderr, "memest: %s\n", err);
        goto end;
    }
    for (int k = 0; k < n_freeze; k++)
        if (memest_freeze(m, freeze[k]) == 0) {
            fprintf(stderr, "memest: --freeze '%s': no layer's module name matches\n", freeze[k]);
            goto end;
        }
    int r = memest_analyze(m, &as, &an, err, sizeof(err));
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
    ms.record_series = plot != NULL;
    if (memest_set_memory(an, &ms, err, sizeof(err)) < 0) {
        fprintf(stderr, "memest: %s\n", err);
        goto end;
    }
    if (*memest_memory_note(an)) fprintf(stderr, "memest: note: memory timeline: %s\n", memest_memory_note(an));
    if (gpu) memest_set_device(an, gpu, ms.amp || (ls.dtype && strcmp(ls.dtype, "float32") && strcmp(ls.dtype, "fp32")));
    if (max_batch) {
        MemestMaxBatch mb;
        if (memest_max_batch(m, &ms, gpu->memory, &mb, progress, NULL, err, sizeof(err)) < 0) {
            if (isatty(2)) fprintf(stderr, "\n");
            fprintf(stderr, "memest: --max-batch: %s\n", err);
            goto end;
        }
        if (isatty(2)) fprintf(stderr, "\r%60s\r", "");
        memest_note_max_batch(an, &mb);
    }
    if (memest_report(an, (MemestFormat)format, out) < 0 || fflush(out) != 0 || ferror(out)) {
        fprintf(stderr, "memest: could not write the report\n");
        goto end;
    }
    rc = EXIT_OK;
    if (plot || netron) {
        const char *p = plot ? plot : netron;
        FILE *pf = fopen(p, "w");
        int pr = pf ? (plot ? memest_plot_svg(an, pf, gpu ? gpu->memory : 0, gpu ? gpu->name : NULL) : memest_netron_metrics(an, pf)) : -1;
        if (pf && fclose(pf) != 0) pr = -1;
        if (pr < 0) {
            fprintf(stderr, "memest: could not write %s\n", p);
            rc = EXIT_BAD;
        }
        if (plot && netron) {
            pf = fopen(netron, "w");
            pr = pf ? memest_netron_metrics(an, pf) : -1;
            if ((pf && fclose(pf) != 0) || pr < 0) {
                fprintf(stderr, "memest: could not write %s\n", netron);
                rc = EXIT_BAD;
            }
        }
    }
    if (update && memest_write_golden(an, update, err, sizeof(err)) < 0) {
        fprintf(stderr, "memest: --update-golden: %s\n", err);
        rc = EXIT_BAD;
    }
    if (check && rc == EXIT_OK) {
        int cr = memest_check_golden(an, check, tolerance, stderr, err, sizeof(err));
        if (cr < 0) {
            fprintf(stderr, "memest: --check: %s\n", err);
            rc = EXIT_BAD;
        } else if (cr > 0) {
            rc = EXIT_CHECK;
        }
    }
end:
    if (out != stdout) fclose(out);
    memest_analysis_free(&an);
    memest_model_free(&m);
    memest_free(user_gpus);
    free(inputs);
    free(dims);
    free(freeze);
    return rc;
}
