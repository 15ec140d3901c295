/* Reports to a caller's write callback or buffer. The renderers write to a
 * FILE*; a stdio stream over the callback (fopencookie) lets every one of
 * them serve all three outputs without a second code path. */
#include <stdio.h>
#include <string.h>

#include "report/report.h"

typedef struct Sink {
    MemestWriteFn write;
    void *opaque;
    bool failed;
} Sink;

static ssize_t sink_write(void *cookie, const char *buf, size_t size)
{
    Sink *s = cookie;
    if (s->failed || s->write(s->opaque, buf, size) < 0) {
        s->failed = true;
        return -1;
    }
    return (ssize_t)size;
}

int me_render_to(MemestWriteFn write, void *opaque, MeRenderFn render, const void *ctx)
{
    if (!write) return ME_EINVAL;
    Sink s = { write, opaque, false };
    FILE *f = fopencookie(&s, "w", (cookie_io_functions_t){ .write = sink_write });
    if (!f) return ME_ENOMEM;
    int rc = render(ctx, f);
    if (fclose(f) != 0 && rc >= 0) rc = ME_EIO;
    if (s.failed && rc >= 0) rc = ME_EIO;
    return rc;
}

typedef struct Buf {
    char *p;
    size_t n, cap;
} Buf;

static int buf_write(void *opaque, const char *data, size_t len)
{
    Buf *b = opaque;
    if (len + 1 > b->cap - b->n) {
        size_t cap = b->cap ? b->cap : 4096;
        while (len + 1 > cap - b->n) {
            if (cap > SIZE_MAX / 2) return ME_ENOMEM;
            cap *= 2;
        }
        char *p = me_realloc(b->p, cap);
        if (!p) return ME_ENOMEM;
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, data, len);
    b->n += len;
    b->p[b->n] = 0;
    return 0;
}

int me_render_string(char **out, size_t *len, MeRenderFn render, const void *ctx)
{
    Buf b = { 0 };
    *out = NULL;
    if (len) *len = 0;
    int rc = me_render_to(buf_write, &b, render, ctx);
    if (rc >= 0 && !b.p) rc = buf_write(&b, "", 0); /* an empty report is still a string */
    if (rc < 0) {
        me_free(b.p);
        /* the buffer's write fails only for want of memory */
        return rc == ME_EIO ? ME_ENOMEM : rc;
    }
    *out = b.p;
    if (len) *len = b.n;
    return 0;
}
