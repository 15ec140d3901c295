/* Capture of the simulation's allocator events (see simtrace.h). */
#include <stdio.h>
#include <string.h>

#include "allocator.h"
#include "simtrace.h"

static MeSimTrace *capturing;

static void record(int kind, int handle, uint64_t bytes)
{
    MeSimTrace *t = capturing;
    if (!t || t->failed) return;
    if (me_grow(&t->ev, &t->cap, t->n + 1, sizeof(MeSimEvent)) < 0) {
        t->failed = true;
        return;
    }
    t->ev[t->n++] = (MeSimEvent){ .kind = (uint8_t)kind, .handle = handle, .bytes = bytes };
}

#ifdef ME_HAVE_WRAP
int __real_me_allocator_malloc(MeAllocator *a, int handle, uint64_t bytes);
int __real_me_allocator_release(MeAllocator *a, int handle);
int __wrap_me_allocator_malloc(MeAllocator *a, int handle, uint64_t bytes);
int __wrap_me_allocator_release(MeAllocator *a, int handle);

int __wrap_me_allocator_malloc(MeAllocator *a, int handle, uint64_t bytes)
{
    record(ME_EV_ALLOC, handle, bytes);
    return __real_me_allocator_malloc(a, handle, bytes);
}

int __wrap_me_allocator_release(MeAllocator *a, int handle)
{
    record(ME_EV_FREE, handle, 0);
    return __real_me_allocator_release(a, handle);
}

bool me_simtrace_available(void) { return true; }
#else
bool me_simtrace_available(void) { return false; }
#endif

int me_simtrace_capture(MemestModel *m, const MemestMemorySettings *s, MeSimTrace *t, MemestMemory *out,
                        char *err, size_t errlen)
{
    t->n = 0;
    t->failed = false;
    if (!me_simtrace_available()) {
        if (err && errlen) snprintf(err, errlen, "built without the linker's --wrap: memest's allocation sequence cannot be captured");
        return ME_EUNSUPPORTED;
    }
    if (s->runtime != MEMEST_RUNTIME_CUDA) {
        if (err && errlen) snprintf(err, errlen, "only the cuda runtime feeds the allocator model");
        return ME_EINVAL;
    }
    capturing = t;
    int rc = memest_memory(m, s, out, err, errlen);
    capturing = NULL;
    if (rc >= 0 && t->failed) {
        if (err && errlen) snprintf(err, errlen, "out of memory");
        rc = ME_ENOMEM;
    }
    return rc;
}

void me_simtrace_free(MeSimTrace *t)
{
    if (!t) return;
    me_free(t->ev);
    memset(t, 0, sizeof(*t));
}

int me_simtrace_compare(const MePlan *p, const MeSimTrace *t, char *msg, size_t len)
{
    int *map = NULL, cap = 0, k = 0, rc = -1;
    if (msg && len) msg[0] = 0;
    for (int i = 0; i < p->n_sim && rc < 0; i++) {
        const MePlanEvent *e = &p->ev[i];
        if (e->kind != ME_EV_ALLOC && e->kind != ME_EV_FREE) continue;
        const char *where = e->node >= 0 ? p->g->n[e->node].module : "-";
        if (k >= t->n) {
            snprintf(msg, len, "event %d: the plan goes on (%s of %llu B at node %s), memest's timeline has ended after %d",
                     k, me_plan_kind_name(e->kind), (unsigned long long)(e->kind == ME_EV_ALLOC ? e->bytes : p->buf[e->buf].bytes), where, t->n);
            rc = k;
            break;
        }
        const MeSimEvent *s = &t->ev[k];
        if (s->kind != e->kind) {
            snprintf(msg, len, "event %d at node %s (%s): the plan does %s, memest does %s", k, where,
                     e->phase == MEMEST_PHASE_FORWARD ? "forward" : e->phase == MEMEST_PHASE_BACKWARD ? "backward" : "optimizer",
                     me_plan_kind_name(e->kind), me_plan_kind_name(s->kind));
            rc = k;
            break;
        }
        if (s->handle < 0 || me_grow(&map, &cap, s->handle + 1, sizeof(int)) < 0) {
            snprintf(msg, len, "event %d: bad handle or out of memory", k);
            rc = k;
            break;
        }
        if (e->kind == ME_EV_ALLOC) {
            if (s->bytes != e->bytes) {
                snprintf(msg, len, "event %d at node %s: the plan allocates %llu B, memest %llu B", k, where,
                         (unsigned long long)e->bytes, (unsigned long long)s->bytes);
                rc = k;
                break;
            }
            map[s->handle] = e->buf + 1; /* 0: never allocated */
        } else if (map[s->handle] - 1 != e->buf) {
            snprintf(msg, len, "event %d at node %s: the plan frees its buffer %d (%llu B), memest frees the %llu B of its storage %d", k,
                     where, e->buf, (unsigned long long)p->buf[e->buf].bytes,
                     (unsigned long long)(map[s->handle] > 0 && map[s->handle] <= p->n_buf ? p->buf[map[s->handle] - 1].bytes : 0), s->handle);
            rc = k;
            break;
        }
        k++;
    }
    if (rc < 0 && k < t->n) {
        snprintf(msg, len, "event %d: memest's timeline goes on (%s of storage %d), the plan has ended", k, me_plan_kind_name(t->ev[k].kind),
                 t->ev[k].handle);
        rc = k;
    }
    me_free(map);
    return rc;
}
