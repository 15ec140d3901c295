/* Fuzz target: load → shape inference → cost → memory timeline → report,
 * for ONNX (FUZZ_ONNX) or JSON (FUZZ_JSON) bytes. Built as a libFuzzer
 * target with clang -fsanitize=fuzzer (-Dfuzzing_engine=libfuzzer), else
 * with the replay driver below, which runs files and folders given on the
 * command line (the corpus, in meson test). Bad input must end in an error
 * code, never a crash: the sanitizer build turns any slip into a failure. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "memest/memest.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* the loaders read files: give them an in-memory one */
    int fd = memfd_create("fuzz", 0);
    if (fd < 0) return 0;
    if (size && write(fd, data, size) != (ssize_t)size) {
        close(fd);
        return 0;
    }
    char path[64];
#ifdef FUZZ_JSON
    /* a .json name picks the JSON loader */
    snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
    char link[80];
    snprintf(link, sizeof(link), "/tmp/memest-fuzz-%d.json", (int)getpid());
    unlink(link);
    if (symlink(path, link) < 0) {
        close(fd);
        return 0;
    }
    const char *model = link;
#else
    snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
    const char *model = path;
#endif
    static const char *const inputs[] = { "3x32x32" };
    MemestLoadSettings ls = { .inputs = inputs, .n_inputs = 0, .batch = 2 };
    char err[1024];
    MemestModel *m = NULL;
    if (memest_model_load(&m, model, &ls, err, sizeof(err)) == 0) {
        MemestAnalyzeSettings as = { .convention = MEMEST_CONVENTION_DEFAULT };
        if (memest_analyze(m, &as, err, sizeof(err)) == 0) {
            MemestMemorySettings ms = { .mode = MEMEST_RUN_TRAIN, .optimizer = MEMEST_OPT_ADAM, .record_series = 1 };
            memest_set_memory(m, &ms, err, sizeof(err));
            FILE *null = fopen("/dev/null", "w");
            if (null) {
                memest_report(m, MEMEST_FORMAT_TABLE, null);
                memest_report(m, MEMEST_FORMAT_JSON, null);
                memest_plot_svg(m, null, 0, NULL);
                fclose(null);
            }
            as.convention = MEMEST_CONVENTION_TORCHSTAT;
            memest_analyze(m, &as, err, sizeof(err));
        }
    }
    memest_model_free(&m);
#ifdef FUZZ_JSON
    unlink(link);
#endif
    close(fd);
    return 0;
}

#ifndef FUZZ_LIBFUZZER
static int run_file(const char *p)
{
    FILE *f = fopen(p, "rb");
    if (!f) return -1;
    struct stat st;
    /* sized to the file: meson's MALLOC_PERTURB_ writes every byte of a buffer */
    size_t cap = fstat(fileno(f), &st) == 0 && st.st_size < (64 << 20) ? (size_t)st.st_size + 1 : 64 << 20;
    uint8_t *buf = malloc(cap);
    size_t n = buf ? fread(buf, 1, cap, f) : 0;
    fclose(f);
    if (!buf) return -1;
    LLVMFuzzerTestOneInput(buf, n);
    free(buf);
    return 0;
}

int main(int argc, char **argv)
{
    int files = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) < 0) {
            fprintf(stderr, "replay: %s: not found\n", argv[i]);
            return 1;
        }
        if (!S_ISDIR(st.st_mode)) {
            files += run_file(argv[i]) == 0;
            continue;
        }
        DIR *d = opendir(argv[i]);
        struct dirent *e;
        while (d && (e = readdir(d))) {
            if (e->d_name[0] == '.') continue;
            char p[4096];
            snprintf(p, sizeof(p), "%s/%s", argv[i], e->d_name);
            files += run_file(p) == 0;
        }
        if (d) closedir(d);
    }
    printf("replayed %d input(s)\n", files);
    return files ? 0 : 1;
}
#endif
