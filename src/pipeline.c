/* Pipeline parallelism (doc/memory.md, "Pipeline parallelism"): every
 * stage of a language model built and simulated for one micro-batch, then
 * Megatron-LM's 1F1B schedule applied to what each holds. */
#include <stdio.h>
#include <string.h>

#include "load/llm.h"
#include "model.h"

/* Micro-batches stage s of P holds at once under the non-interleaved 1F1B
 * schedule (megatron/core/pipeline_parallel/schedules.py,
 * forward_backward_pipelining_without_interleaving): num_warmup_microbatches
 * = min(P - s - 1, M) forwards, then one more forward before the first
 * backward when M exceeds them (num_microbatches_remaining > 0). */
static int in_flight(int P, int s, int M)
{
    int warm = P - s - 1 < M ? P - s - 1 : M;
    return warm < M ? warm + 1 : warm;
}

/* One stage: loaded, analyzed and simulated under ms; its figures in st. */
static int run_stage(const char *path, const MemestLoadSettings *ls, const MemestMemorySettings *ms, int s, int M,
                     const MemestGpu *gpu, MemestPipelineStage *st, char *err, size_t errlen)
{
    MemestLoadSettings l = *ls;
    l.pp_stage = s;
    MemestMemorySettings m = *ms;
    m.record_series = 0;
    /* a stage before the last ends in hidden states: backward from the
     * gradient the next stage sends (send_backward / recv_backward) */
    if (s < ls->pp_stages - 1) m.loss = MEMEST_LOSS_NONE;
    MemestModel *model = NULL;
    MemestAnalysis *an = NULL;
    MemestAnalyzeSettings as;
    memest_analyze_default_settings(&as);
    int rc = memest_model_load(&model, path, &l, err, errlen);
    if (rc >= 0) rc = memest_analyze(model, &as, &an, err, errlen);
    if (rc >= 0) rc = memest_set_memory(an, &m, err, errlen);
    MemestMemory mem[2];
    int n = rc >= 0 ? memest_memory_steps(an, mem, 2) : 0;
    if (rc >= 0 && !n) {
        snprintf(err, errlen, "%s: pipeline stage %d: no memory timeline (%s)", path, s, an->memory.skipped);
        rc = MEMEST_ERR_INVALID;
    }
    st->in_flight = in_flight(ls->pp_stages, s, M);
    for (int k = 0; rc >= 0 && k < n; k++) {
        uint64_t ctx = m.runtime == MEMEST_RUNTIME_CUDA ? mem[k].cuda_context : 0;
        uint64_t one = me_sadd(mem[k].peak_allocated, ctx), fb = me_sadd(mem[k].backward_peak, ctx);
        /* the earlier micro-batches' gradients are there through a later
         * one's backward (they accumulate into .grad / main_grad) */
        uint64_t ge = M > 1 && mem[k].grads_end > mem[k].backward_peak_grads ? mem[k].grads_end - mem[k].backward_peak_grads : 0;
        uint64_t need = me_sadd(me_sadd(fb, me_smul((uint64_t)(st->in_flight - 1), mem[k].forward_end)), ge);
        if (one > need) need = one; /* the update: nothing in flight */
        if (need >= st->needed) {
            st->needed = need;
            st->peak = one;
            st->backward_peak = fb;
            st->held = mem[k].forward_end;
            st->grads_extra = ge;
            st->weights = mem[k].at_peak[MEMEST_MEM_WEIGHTS];
        }
    }
    MemestTiming t;
    if (rc >= 0 && gpu && memest_set_device(an, gpu, ms->amp || (ls->dtype && strcmp(ls->dtype, "float32"))) >= 0 &&
        memest_timing(an, &t) == 0) {
        st->compute_s = t.forward_s + t.backward_s + t.recompute_s;
        st->optimizer_s = t.optimizer_s;
    }
    memest_analysis_free(&an);
    memest_model_free(&model);
    return rc;
}

int memest_pipeline(const char *path, const MemestLoadSettings *ls, const MemestMemorySettings *ms, int micro_batches,
                    const MemestGpu *gpu, MemestPipeline *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof(*out));
    if (err && errlen) err[0] = 0;
    int P = ls ? ls->pp_stages : 0, M = micro_batches ? micro_batches : P;
    if (!path || !ls || !ms || P < 2 || P > MEMEST_PP_MAX || M < 1 || ms->mode != MEMEST_RUN_TRAIN) {
        if (err && errlen)
            snprintf(err, errlen, "%s: a pipeline needs 2 to %d stages, 1 or more micro-batches and a training step", path ? path : "?",
                     MEMEST_PP_MAX);
        return MEMEST_ERR_INVALID;
    }
    if (!me_llm_recognize(path, NULL, 0)) {
        if (err && errlen) snprintf(err, errlen, "%s: --pp splits a language model's decoder layers (a config.json or a model folder)", path);
        return MEMEST_ERR_INVALID;
    }
    MeLlmConfig c;
    MeDiag d = { 0 };
    int rc = me_llm_read(path, &c, &d);
    int64_t L = c.layers;
    me_llm_config_free(&c);
    if (rc < 0) {
        if (err && errlen) snprintf(err, errlen, "%s", d.msg);
        return rc;
    }
    out->stages = P;
    out->micro_batches = M;
    out->bubble = (double)(P - 1) / M;
    double slow = 0, opt = 0;
    for (int s = 0; s < P; s++) {
        MemestPipelineStage *st = &out->stage[s];
        st->layers = (int)(L / P);
        st->first_layer = s * st->layers;
        if ((rc = run_stage(path, ls, ms, s, M, gpu, st, err, errlen)) < 0) return rc;
        if (st->needed > out->stage[out->worst].needed) out->worst = s;
        if (st->compute_s > slow) slow = st->compute_s;
        if (st->optimizer_s > opt) opt = st->optimizer_s;
    }
    /* every micro-batch slot lasts as long as the slowest stage's forward
     * and backward: M + P - 1 slots, then the optimizer steps in parallel */
    if (slow > 0) out->step_s = (double)(M + P - 1) * slow + opt;
    return 0;
}

void memest_note_pipeline(MemestAnalysis *a, const MemestPipeline *p)
{
    a->pipeline = *p;
    a->has_pipeline = true;
}
