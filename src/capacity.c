/* Capacity answers: how much a step needs on a GPU, and the largest batch
 * that fits (solved, then confirmed with the full timeline). */
#include <string.h>

#include "load/llm.h"
#include "model.h"

uint64_t me_memory_needed(const MeMemResult *r)
{
    uint64_t need = 0;
    for (int k = 0; k < r->n_mem; k++) {
        const MemestMemory *m = &r->mem[k];
        /* On a failed cudaMalloc the caching allocator frees its cached
         * segments and retries before raising OOM, so what must fit is the
         * allocated peak (512 B blocks) plus the context, not the reserved
         * figure */
        uint64_t n = r->settings.runtime == MEMEST_RUNTIME_CUDA ? m->peak_allocated + m->cuda_context : m->peak_allocated;
        if (n > need) need = n;
    }
    return need;
}

uint64_t memest_memory_needed(const MemestAnalysis *a)
{
    if (a && a->has_pipeline) return a->pipeline.stage[a->pipeline.worst].needed; /* the worst stage, its micro-batches in flight */
    return a && a->has_memory ? me_memory_needed(&a->memory) : 0;
}

/* Memory needed at batch b: the model re-bound to b (frozen layers and the
 * rest of its binding kept), then its timeline. */
static int needed_at(MemestModel *m, const MemestMemorySettings *mem, bool seq, int64_t b, uint64_t *need, char *err, size_t errlen)
{
    MemestLoadSettings ls = m->bind;
    int rc = 0;
    if (seq) rc = me_llm_bind_seq(m, b, &ls); /* a language model's prompt of b tokens */
    else ls.batch = b;
    if (!seq && m->llm_paged) rc = me_llm_bind_seq(m, m->kv_tokens - m->llm_new_tokens, &ls); /* the pools' blocks follow the batch */
    if (rc >= 0) rc = me_model_rebind(m, &ls, err, errlen);
    if (rc < 0) return rc;
    MemestMemorySettings ms = *mem;
    ms.record_series = 0;
    MeMemResult r = { 0 };
    rc = me_memory_run(m, &ms, &r, err, errlen, false); /* the figure alone */
    if (rc >= 0 && !r.n_mem) {
        snprintf(err, errlen, "%s", r.skipped);
        rc = ME_EUNSUPPORTED;
    }
    if (rc >= 0) *need = me_memory_needed(&r);
    me_memory_result_free(&r);
    return rc;
}

/* The largest x (a batch, or a prompt when seq) up to limit whose step
 * fits; needed_next 0 when limit itself fits. */
static int search(MemestModel *m, const MemestMemorySettings *mem, bool seq, int64_t limit, uint64_t capacity,
                  MemestMaxBatch *out, void (*progress)(void *, int64_t, uint64_t), void *opaque, char *err, size_t errlen)
{
    uint64_t n1, n8;
    int rc;
#define AT(b, var)                                                            \
    do {                                                                      \
        if ((rc = needed_at(m, mem, seq, (b), &(var), err, errlen)) < 0) return rc; \
        out->simulations++;                                                   \
        if (progress) progress(opaque, (b), (var));                           \
    } while (0)
    AT(1, n1);
    if (n1 > capacity) {
        out->needed_next = n1;
        return 0;
    }
    if (limit <= 1) {
        out->batch = 1;
        out->needed = n1;
        return 0;
    }
    AT(8 < limit ? 8 : limit, n8);
    /* a + k·b through the two points; the allocator's rounding bends it
     * a little, which the confirmation below absorbs */
    double k = n8 > n1 ? (double)(n8 - n1) / 7.0 : 0;
    int64_t guess = k > 0 ? (int64_t)(((double)capacity - ((double)n1 - k)) / k) : (INT64_C(1) << 30);
    if (guess < 1) guess = 1;
    if (guess > (INT64_C(1) << 30)) guess = INT64_C(1) << 30;
    if (guess > limit) guess = limit;
    /* bracket [lo fits, hi does not], then bisect */
    int64_t lo = 1, hi = 0;
    uint64_t nlo = n1, nhi = 0, ng;
    AT(guess, ng);
    if (ng <= capacity) {
        lo = guess;
        nlo = ng;
        int64_t step = guess / 16 > 0 ? guess / 16 : 1;
        for (;;) {
            int64_t b = lo + step;
            if (lo == limit) { hi = limit + 1; nhi = 0; break; }
            if (b > limit) b = limit;
            if (b > (INT64_C(1) << 31)) { hi = b; nhi = UINT64_MAX; break; }
            AT(b, ng);
            if (ng > capacity) { hi = b; nhi = ng; break; }
            lo = b;
            nlo = ng;
            step *= 2;
        }
    } else {
        hi = guess;
        nhi = ng;
        int64_t step = guess / 16 > 0 ? guess / 16 : 1;
        for (;;) {
            int64_t b = hi - step;
            if (b <= 1) break; /* lo = 1 fits */
            AT(b, ng);
            if (ng <= capacity) { lo = b; nlo = ng; break; }
            hi = b;
            nhi = ng;
            step *= 2;
        }
    }
    while (hi - lo > 1) {
        int64_t mid = lo + (hi - lo) / 2;
        AT(mid, ng);
        if (ng <= capacity) { lo = mid; nlo = ng; }
        else { hi = mid; nhi = ng; }
    }
#undef AT
    out->batch = lo;
    out->needed = nlo;
    out->needed_next = nhi;
    return 0;
}

/* Binds the model back to own (the same shapes as before the search, so
 * analyses made of it stay current); an error there is the search's
 * result when the search itself went well. */
static int rebind_back(MemestModel *m, const MemestLoadSettings *own, uint64_t gen, int rc, char *err, size_t errlen)
{
    char e2[256];
    if (me_model_rebind(m, own, e2, sizeof(e2)) >= 0) m->generation = gen;
    else if (rc >= 0) {
        if (err && errlen) snprintf(err, errlen, "%s", e2);
        rc = ME_EINVAL;
    }
    return rc;
}

int memest_max_batch(MemestModel *m, const MemestMemorySettings *mem, uint64_t capacity, MemestMaxBatch *out,
                     void (*progress)(void *, int64_t, uint64_t), void *opaque, char *err, size_t errlen)
{
    memset(out, 0, sizeof(*out));
    if (!m || !mem || !m->bound) {
        if (err && errlen) snprintf(err, errlen, "no model with a valid binding");
        return ME_EINVAL;
    }
    MemestLoadSettings own = m->bind;
    uint64_t gen = m->generation;
    int rc = search(m, mem, false, INT64_MAX, capacity, out, progress, opaque, err, errlen);
    return rebind_back(m, &own, gen, rc, err, errlen);
}

void memest_note_max_batch(MemestAnalysis *a, const MemestMaxBatch *mb)
{
    a->max_batch = *mb;
    a->has_max_batch = true;
}

int memest_max_seq(MemestModel *m, const MemestMemorySettings *mem, uint64_t capacity, MemestMaxSeq *out,
                   void (*progress)(void *, int64_t, uint64_t), void *opaque, char *err, size_t errlen)
{
    memset(out, 0, sizeof(*out));
    if (!m || !mem || !m->bound || !m->llm) {
        if (err && errlen) snprintf(err, errlen, "applies to language models (a config.json or a model folder)");
        return ME_EINVAL;
    }
    MemestLoadSettings own = m->bind;
    uint64_t gen = m->generation;
    int64_t tokens = m->kv_tokens;
    MemestMaxBatch r = { 0 };
    /* a prompt and its new tokens stay within the positions the model knows */
    int64_t limit = m->llm_max_pos - m->llm_new_tokens;
    int rc = ME_EINVAL;
    if (limit >= 1) rc = search(m, mem, true, limit, capacity, &r, progress, opaque, err, errlen);
    else if (err && errlen)
        snprintf(err, errlen, "--new-tokens %lld leaves no room in max_position_embeddings %lld", (long long)m->llm_new_tokens,
                 (long long)m->llm_max_pos);
    *out = (MemestMaxSeq){ .seq = r.batch, .needed = r.needed, .needed_next = r.needed_next, .simulations = r.simulations };
    m->kv_tokens = tokens;
    return rebind_back(m, &own, gen, rc, err, errlen);
}

void memest_note_max_seq(MemestAnalysis *a, const MemestMaxSeq *ms)
{
    a->max_seq = *ms;
    a->has_max_seq = true;
}

/* vLLM's defaults: EngineArgs gpu_memory_utilization 0.9; SchedulerConfig
 * max_num_seqs 256 and, without chunked prefill, max_num_batched_tokens =
 * max(max_model_len, 2048) (v0.6; V1's default for an OpenAI server on
 * a GPU of 70 GiB or more is 8192, the same for an 8K-context model) */
#define ME_VLLM_UTILIZATION 0.9
#define ME_VLLM_MAX_SEQS 256
#define ME_VLLM_MIN_BATCHED 2048

/* The timeline of the model at path loaded with ls */
static int serve_timeline(const char *path, const MemestLoadSettings *ls, const MemestMemorySettings *mem, MemestMemory *out,
                          char *err, size_t errlen)
{
    MemestModel *m = NULL;
    int rc = memest_model_load(&m, path, ls, err, errlen);
    MemestMemorySettings ms = *mem;
    ms.record_series = 0;
    if (rc >= 0) rc = memest_memory(m, &ms, out, err, errlen);
    memest_model_free(&m);
    return rc;
}

/* What torch allocates beyond what was there before the step (weights and
 * inputs: the paged pools, which vLLM's profile run does not have) */
static uint64_t step_activations(const MemestMemory *r)
{
    uint64_t base = me_sadd(r->at_peak[MEMEST_MEM_WEIGHTS], r->at_peak[MEMEST_MEM_INPUTS]);
    return r->peak_allocated > base ? r->peak_allocated - base : 0;
}

/* The decode step of n sequences of len tokens (paged: len - 1 cached, one
 * new) as vLLM runs it: its timeline, with the activation reserve held back
 * where the step itself needs less, and the context */
static int serve_decode(const char *path, const MemestLoadSettings *ls, const MemestMemorySettings *mem, int64_t n,
                        const MemestConcurrency *c, uint64_t *need, char *err, size_t errlen)
{
    MemestLoadSettings d = *ls;
    d.kv_cache = MEMEST_KV_PAGED;
    d.attn = MEMEST_ATTN_DEFAULT;
    d.batch = n;
    d.seq = c->settings.len - 1;
    d.new_tokens = 1;
    MemestMemory r;
    int rc = serve_timeline(path, &d, mem, &r, err, errlen);
    if (rc < 0) return rc;
    uint64_t act = step_activations(&r);
    *need = me_sadd(me_sadd(r.peak_allocated, act < c->activation_peak ? c->activation_peak - act : 0), c->context);
    return 0;
}

int memest_max_concurrency(const MemestModel *model, const char *path, const MemestLoadSettings *ls,
                           const MemestMemorySettings *mem, uint64_t gpu_memory, const MemestConcurrencySettings *cs,
                           MemestConcurrency *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof(*out));
    MemestConcurrencySettings s = *cs;
    if (!model || !model->llm || !path) {
        if (err && errlen) snprintf(err, errlen, "applies to language models (a config.json or a model folder)");
        return ME_EINVAL;
    }
    if (!s.gpu_memory_utilization) s.gpu_memory_utilization = ME_VLLM_UTILIZATION;
    if (!s.max_num_seqs) s.max_num_seqs = ME_VLLM_MAX_SEQS;
    if (!s.max_num_batched_tokens) s.max_num_batched_tokens = model->llm_max_pos > ME_VLLM_MIN_BATCHED ? model->llm_max_pos : ME_VLLM_MIN_BATCHED;
    const char *why = NULL;
    if (mem->runtime != MEMEST_RUNTIME_CUDA) why = "vLLM's budget is a GPU's (--runtime cuda)";
    else if (ls->kv_cache != MEMEST_KV_DYNAMIC && ls->kv_cache != MEMEST_KV_PAGED) why = "vLLM's cache is paged (--kv-cache paged or none)";
    else if (s.len < 2 || s.len > model->llm_max_pos) why = "a sequence holds from 2 tokens to the model's max_position_embeddings";
    else if (!(s.gpu_memory_utilization > 0 && s.gpu_memory_utilization <= 1)) why = "gpu_memory_utilization is a fraction in (0, 1]";
    else if (s.max_num_seqs < 1 || s.max_num_batched_tokens < 1 || s.max_num_batched_tokens > ME_MAX_DIM)
        why = "max_num_batched_tokens and max_num_seqs must be positive";
    if (why) {
        if (err && errlen) snprintf(err, errlen, "%s", why);
        return ME_EINVAL;
    }
    out->settings = s;
    out->block_tokens = ME_LLM_BLOCK;
    out->block_bytes = me_smul(model->kv_per_token, ME_LLM_BLOCK);
    out->blocks_per_seq = (s.len + ME_LLM_BLOCK - 1) / ME_LLM_BLOCK;
    out->budget = (uint64_t)(s.gpu_memory_utilization * (double)gpu_memory);
    out->context = mem->cuda_context;
    /* the profile run (worker.py profile_run, V1 gpu_model_runner's
     * _dummy_run): max_num_batched_tokens split over max_num_seqs dummy
     * sequences, the cache empty, flash attention, logits for each
     * sequence's last token */
    out->profile_seqs = s.max_num_seqs < s.max_num_batched_tokens ? s.max_num_seqs : s.max_num_batched_tokens;
    out->profile_tokens = s.max_num_batched_tokens / out->profile_seqs;
    MemestLoadSettings p = *ls;
    p.kv_cache = MEMEST_KV_PAGED;
    p.attn = MEMEST_ATTN_DEFAULT;
    p.batch = out->profile_seqs;
    p.seq = out->profile_tokens;
    p.new_tokens = 0;
    MemestMemory r;
    int rc = serve_timeline(path, &p, mem, &r, err, errlen);
    if (rc < 0) return rc;
    out->simulations++;
    out->weights = r.at_peak[MEMEST_MEM_WEIGHTS];
    out->activation_peak = step_activations(&r);
    uint64_t held = me_sadd(me_sadd(out->weights, out->activation_peak), out->context);
    out->blocks = out->budget > held && out->block_bytes ? (int64_t)((out->budget - held) / out->block_bytes) : 0;
    int64_t fit = out->blocks / out->blocks_per_seq;
    out->seqs = fit < s.max_num_seqs ? fit : s.max_num_seqs;
    out->capped = fit > s.max_num_seqs;
    /* confirmation: the decode step of the answer fits, one more does not */
    if (out->seqs > 0) {
        if ((rc = serve_decode(path, ls, mem, out->seqs, out, &out->needed, err, errlen)) < 0) return rc;
        out->simulations++;
    }
    if (!out->capped) {
        if ((rc = serve_decode(path, ls, mem, out->seqs + 1, out, &out->needed_next, err, errlen)) < 0) return rc;
        out->simulations++;
    }
    out->confirmed = out->needed <= out->budget && (out->capped || out->needed_next > out->budget);
    return 0;
}

double me_concurrency_decode_bound(const MemestConcurrency *c, double bandwidth)
{
    /* every weight and each sequence's len tokens of cache read once a step
     * (the paged kernel stops at context_len) */
    double bytes = (double)c->weights + (double)c->seqs * (double)c->settings.len * (double)c->block_bytes / (double)c->block_tokens;
    return c->seqs > 0 && bandwidth > 0 && bytes > 0 ? (double)c->seqs * bandwidth / bytes : 0;
}

void memest_note_concurrency(MemestAnalysis *a, const MemestConcurrency *c)
{
    a->concurrency = *c;
    a->has_concurrency = true;
}
