/* The replay driver of the fuzz targets outside libFuzzer: runs
 * LLVMFuzzerTestOneInput over the files and folders named on the command
 * line (meson test replays each corpus). Included once, by a target's .c. */
#ifndef MEMEST_FUZZ_REPLAY_H
#define MEMEST_FUZZ_REPLAY_H

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

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
