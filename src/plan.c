/* --plan: the ways to train a language model on N GPUs of one kind, each
 * simulated as one rank (doc/memory.md, "Plans"). A plan is a
 * tensor-parallel size T (Megatron-LM, sequence parallelism on when T > 1:
 * it saves memory at the same communication volume, Korthikanti et al.
 * 2022 section 4.2.2), the data-parallel size D = N / T, a ZeRO stage for
 * the data-parallel group and an activation checkpointing choice. Its
 * per-GPU need is its own full timeline (the rank's graph built with
 * --tp/--sp, run with --gpus D --shard S --checkpoint C); its step time
 * is that graph's roofline plus the collectives, never overlapped:
 *   tensor parallel  per layer and micro-batch, two all-reduces of the
 *                    [b, s, h] activations in forward and two in backward
 *                    (Shoeybi et al. 2019, figure 4), two more when the
 *                    layer's forward runs again (per-layer checkpointing);
 *                    under sequence parallelism each is an all-gather and a
 *                    reduce-scatter of the same volume. A ring all-reduce
 *                    moves 2 (T - 1) / T of the bytes over each link.
 *   data parallel    the gradients' all-reduce, 2 (D - 1) / D of their
 *                    bytes (ZeRO-1/2's reduce-scatter and the parameters'
 *                    all-gather after the step move the same); ZeRO-3
 *                    gathers the parameters in forward and in backward,
 *                    3 (D - 1) / D (Rajbhandari et al. 2020, section 7).
 * Links: the GPU's link_bandwidth (one way) within a node of 8; beyond
 * 8 GPUs the data-parallel traffic crosses nodes at 50 GB/s a GPU
 * (400 Gb/s InfiniBand NDR per GPU, the DGX H100 layout) and T stays
 * within a node. */
#include <stdio.h>
#include <string.h>

#include "load/llm.h"
#include "model.h"

#define NODE_GPUS 8
#define INTER_NODE_BW 50e9
#define ME_PLAN_MAX_GPUS 4096
/* micro-batches a step when not given: gradient accumulation, or the
 * pipeline's micro-batches (a bubble of (P - 1) / 8) */
#define ME_PLAN_MICRO_BATCHES 8

/* One rank's graph loaded for (tp, sp): its analysis for each of the
 * memory settings tried on it */
typedef struct Rank {
    MemestModel *m;
    MemestAnalysis *an;
    int64_t layers, hidden;
    MeDType act;
} Rank;

/* Host transfers of ZeRO-Offload: PCIe 4.0 x16 one way (DeepSpeed moves
 * the rank's 16-bit gradients down and its updated parameters up) */
#define OFFLOAD_PCIE_BW 32e9

static int run_row(const char *path, const MemestLoadSettings *ls, Rank *r, const MemestMemorySettings *base,
                   const MemestGpu *gpu, int gpus, int M, MemestPlanRow *row, char *err, size_t errlen)
{
    MemestMemorySettings ms = *base;
    ms.record_series = 0;
    ms.checkpoint = row->checkpoint;
    ms.gpus = row->dp;
    ms.shard = row->dp > 1 ? row->shard : MEMEST_SHARD_DDP;
    ms.offload = row->offload;
    int rc = 0;
    MemestTiming t;
    if ((rc = memest_set_memory(r->an, &ms, err, errlen)) < 0) return rc;
    if ((rc = memest_set_device(r->an, gpu, 0)) < 0 || (rc = memest_timing(r->an, &t)) < 0) {
        if (err && errlen) snprintf(err, errlen, "--plan needs the GPU's bandwidth and FLOP/s (a --gpu, not --gpu-mem alone)");
        return rc < 0 ? rc : ME_EINVAL;
    }
    double slot, opt;   /* one micro-batch's forward and backward; the update */
    double layers = (double)r->layers, slots = M;
    if (row->pp > 1) {
        /* every stage's own timeline, Megatron's 1F1B in flight (pipeline.c) */
        MemestLoadSettings l = *ls;
        l.tp = row->tp > 1 ? row->tp : 0;
        l.sp = row->sp;
        l.pp_stages = row->pp;
        l.train = 1;
        MemestPipeline *pl = me_malloc(sizeof(*pl));
        if (!pl) return ME_ENOMEM;
        rc = memest_pipeline(path, &l, &ms, M, gpu, pl, err, errlen);
        if (rc >= 0) {
            row->needed = pl->stage[pl->worst].needed;
            slot = opt = 0;
            for (int k = 0; k < pl->stages; k++) {
                if (pl->stage[k].compute_s > slot) slot = pl->stage[k].compute_s;
                if (pl->stage[k].optimizer_s > opt) opt = pl->stage[k].optimizer_s;
            }
        }
        me_free(pl);
        if (rc < 0) return rc;
        layers /= row->pp;
        slots = M + row->pp - 1;
    } else {
        /* gradient accumulation over M micro-batches: the earlier ones'
         * gradients are there through a later one's backward */
        const MeMemResult *mr = &r->an->memory;
        for (int k = 0; k < mr->n_mem; k++) {
            const MemestMemory *x = &mr->mem[k];
            uint64_t ctx = ms.runtime == MEMEST_RUNTIME_CUDA ? x->cuda_context : 0;
            uint64_t ge = M > 1 && x->grads_end > x->backward_peak_grads ? x->grads_end - x->backward_peak_grads : 0;
            uint64_t need = me_sadd(me_sadd(x->backward_peak, ctx), ge), one = me_sadd(x->peak_allocated, ctx);
            if (one > need) need = one;
            if (need > row->needed) row->needed = need;
        }
        slot = t.forward_s + t.backward_s + t.recompute_s;
        opt = t.optimizer_s;
    }
    row->fits = row->needed <= gpu->memory;
    /* the optimizer updates this rank's shard of the state under ZeRO; on
     * the host under offload (its time not modelled: said in the report) */
    if (row->offload) opt = 0;
    else if (ms.shard >= MEMEST_SHARD_ZERO1 && row->dp > 1) opt /= row->dp;
    row->compute_s = slots * slot + opt;
    double link = gpu->link_bandwidth, cross = gpus > NODE_GPUS ? INTER_NODE_BW : link;
    double act = (double)t.batch * (double)r->an->model->kv_tokens * (double)r->hidden * me_dtype_size(r->act);
    if (row->tp > 1) {
        double passes = row->checkpoint == MEMEST_CHECKPOINT_LAYERS ? 6 : 4;
        row->tp_comm_s = slots * layers * passes * 2.0 * (row->tp - 1) / row->tp * act / link;
    }
    /* the stages send a micro-batch's hidden states forward and their
     * gradient back (a sequence shard under SP), a slot each */
    if (row->pp > 1) row->pp_comm_s = slots * 2.0 * act / (row->sp ? row->tp : 1) / cross;
    /* this rank's gradients: its parameters (its stage's share) in their dtype */
    double gb = (double)r->an->totals.params / row->pp * me_dtype_size(r->act);
    if (row->dp > 1) {
        double f = ms.shard == MEMEST_SHARD_ZERO3 ? 3.0 : 2.0;
        row->dp_comm_s = f * (row->dp - 1) / row->dp * gb / cross;
    }
    if (row->offload) row->dp_comm_s += 2.0 * gb / (row->dp > 1 ? row->dp : 1) / OFFLOAD_PCIE_BW;
    row->step_s = row->compute_s + row->tp_comm_s + row->pp_comm_s + row->dp_comm_s;
    double tokens = (double)t.batch * (double)r->an->model->kv_tokens * row->dp * M;
    row->tokens_per_s = row->step_s > 0 ? tokens / row->step_s : 0;
    return 0;
}

static int load_rank(const char *path, const MemestLoadSettings *ls, int tp, Rank *r, char *err, size_t errlen)
{
    MemestLoadSettings l = *ls;
    l.tp = tp > 1 ? tp : 0;
    l.sp = tp > 1;
    l.train = 1;
    int rc = memest_model_load(&r->m, path, &l, err, errlen);
    MemestAnalyzeSettings as;
    memest_analyze_default_settings(&as);
    if (rc >= 0) rc = memest_analyze(r->m, &as, &r->an, err, errlen);
    if (rc < 0) return rc;
    MeLlmConfig c;
    MeDiag d = { 0 };
    if ((rc = me_llm_read(path, &c, &d)) < 0) {
        if (err && errlen) snprintf(err, errlen, "%.400s", d.msg);
        return rc;
    }
    r->layers = c.layers;
    r->hidden = c.hidden;
    r->act = c.dtype;
    int t = ls->dtype ? me_dtype_from_name(ls->dtype) : -1;
    if (t > 0 && me_dtype_is_float((MeDType)t)) r->act = (MeDType)t;
    me_llm_config_free(&c);
    return 0;
}

static void free_rank(Rank *r)
{
    memest_analysis_free(&r->an);
    memest_model_free(&r->m);
}

/* Marks the rows that fit and that no other fitting row beats in both
 * need and step time per token (tokens/s). */
static void pareto(MemestPlan *p)
{
    p->n_fit = p->n_pareto = 0;
    for (int i = 0; i < p->n_rows; i++) {
        MemestPlanRow *a = &p->rows[i];
        a->pareto = 0;
        if (!a->fits) continue;
        p->n_fit++;
        bool beaten = false;
        for (int j = 0; j < p->n_rows && !beaten; j++) {
            const MemestPlanRow *b = &p->rows[j];
            if (j == i || !b->fits) continue;
            /* step time per token trained: a step of D data-parallel
             * ranks trains D micro-batches */
            bool no_worse = b->needed <= a->needed && b->tokens_per_s >= a->tokens_per_s;
            bool better = b->needed < a->needed || b->tokens_per_s > a->tokens_per_s;
            /* of two equal rows the first stays */
            beaten = no_worse && (better || j < i);
        }
        if (!beaten) {
            a->pareto = 1;
            p->n_pareto++;
        }
    }
}

static int plan_n(const char *path, const MemestLoadSettings *ls, const MemestMemorySettings *mem, const MemestGpu *gpu,
                  int gpus, int micro_batches, MemestPlan *out, char *err, size_t errlen);

/* gpus 0: the fewest GPUs for which a plan fits, among 1 to 8 and whole
 * nodes of 8 (doubling, then bisected between the last two) */
int memest_plan(const char *path, const MemestLoadSettings *ls, const MemestMemorySettings *mem, const MemestGpu *gpu,
                int gpus, int micro_batches, MemestPlan *out, char *err, size_t errlen)
{
    if (gpus) return plan_n(path, ls, mem, gpu, gpus, micro_batches, out, err, errlen);
    int sims = 0, lo = 0, rc = 0;
    for (int n = 1; n <= ME_PLAN_MAX_GPUS; n = n < NODE_GPUS ? n + 1 : 2 * n) {
        if ((rc = plan_n(path, ls, mem, gpu, n, micro_batches, out, err, errlen)) < 0) return rc;
        sims += out->simulations;
        if (out->n_fit) {
            /* between lo and n GPUs (whole nodes): the fewest that fit */
            int hi = n;
            while (lo >= NODE_GPUS && hi - lo > NODE_GPUS) {
                int mid = (lo + hi) / 2 / NODE_GPUS * NODE_GPUS;
                MemestPlan t;
                if ((rc = plan_n(path, ls, mem, gpu, mid, micro_batches, &t, err, errlen)) < 0) break;
                sims += t.simulations;
                if (t.n_fit) {
                    memest_plan_free(out);
                    *out = t;
                    hi = mid;
                } else {
                    memest_plan_free(&t);
                    lo = mid;
                }
            }
            out->simulations = sims;
            out->fewest = 1;
            return rc;
        }
        lo = n;
        if (n == ME_PLAN_MAX_GPUS) break;
        memest_plan_free(out);
    }
    out->simulations = sims;
    out->fewest = 1;
    return rc;
}

static int plan_n(const char *path, const MemestLoadSettings *ls, const MemestMemorySettings *mem, const MemestGpu *gpu,
                  int gpus, int micro_batches, MemestPlan *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof(*out));
    const char *why = NULL;
    if (!path || !me_llm_recognize(path, NULL, 0)) why = "applies to language models (a config.json or a model folder)";
    else if (mem->mode != MEMEST_RUN_TRAIN) why = "plans a training step (--train)";
    else if (gpus < 1 || gpus > ME_PLAN_MAX_GPUS) why = "plans from 1 to 4096 GPUs (--gpus N, the whole job's)";
    else if (ls->tp > 1 || ls->sp || ls->pp_stages > 1) why = "chooses the tensor and pipeline parallelism itself (--tp/--sp/--pp bind nothing)";
    else if (micro_batches < 0 || micro_batches > 4096) why = "takes 1 to 4096 micro-batches a step";
    else if (mem->offload) why = "chooses the offload itself (--offload binds nothing)";
    else if (!me_roofline_known(gpu) || gpu->link_bandwidth <= 0)
        why = "needs the GPU's bandwidth, FLOP/s and link bandwidth (a --gpu from the table, or a --gpu-file entry with link_gbs)";
    if (why) {
        if (err && errlen) snprintf(err, errlen, "%s", why);
        return ME_EINVAL;
    }
    out->gpus = gpus;
    out->gpu = *gpu;
    int cap = 0, rc = 0;
    for (int tp = 1; tp <= NODE_GPUS && tp <= gpus; tp *= 2) {
        if (gpus % tp) continue;
        Rank r = { 0 };
        char e2[512];
        rc = load_rank(path, ls, tp, &r, e2, sizeof(e2));
        if (rc < 0 && tp > 1) {
            /* a size the model's heads or width do not split: not a plan, said */
            size_t n = strlen(out->skipped);
            snprintf(out->skipped + n, sizeof(out->skipped) - n, "%s--tp %d: %s", n ? "; " : "", tp, e2);
            free_rank(&r);
            rc = 0;
            continue;
        }
        if (rc < 0) {
            if (err && errlen) snprintf(err, errlen, "%s", e2);
            free_rank(&r);
            break;
        }
        out->micro_batch = r.m->bind.batch > 0 ? r.m->bind.batch : 1;
        out->micro_batches = micro_batches > 0 ? micro_batches : ME_PLAN_MICRO_BATCHES;
        out->seq = r.m->kv_tokens;
        int M = out->micro_batches;
        for (int pp = 1; pp <= NODE_GPUS && rc >= 0; pp *= 2) {
            if ((gpus / tp) % pp || r.layers % pp) continue;
            int dp = gpus / tp / pp;
            int ckpts[3] = { 0, MEMEST_CHECKPOINT_LAYERS, MEMEST_CHECKPOINT_SELECTIVE };
            for (int ci = 0; ci < 3 && rc >= 0; ci++) {
                bool no_core = false;
                for (int z = MEMEST_SHARD_DDP; z <= MEMEST_SHARD_ZERO3 && rc >= 0 && !no_core; z++) {
                    if (dp == 1 && z > MEMEST_SHARD_DDP) break;
                    for (int off = MEMEST_OFFLOAD_NONE; off <= MEMEST_OFFLOAD_OPTIMIZER && rc >= 0; off++) {
                        /* DeepSpeed offloads a ZeRO partition: stage 1 or more with data parallelism */
                        if (off && dp > 1 && z == MEMEST_SHARD_DDP) continue;
                        if (out->n_rows == cap) {
                            int nc = cap ? 2 * cap : 64;
                            MemestPlanRow *nr = me_realloc(out->rows, sizeof(*nr) * (size_t)nc);
                            if (!nr) { rc = ME_ENOMEM; break; }
                            out->rows = nr;
                            cap = nc;
                        }
                        MemestPlanRow *row = &out->rows[out->n_rows];
                        *row = (MemestPlanRow){ .tp = tp, .sp = tp > 1, .pp = pp, .dp = dp, .shard = z, .checkpoint = ckpts[ci],
                                                .offload = off, .micro_batches = M };
                        rc = run_row(path, ls, &r, mem, gpu, gpus, M, row, e2, sizeof(e2));
                        if (rc < 0 && ckpts[ci] == MEMEST_CHECKPOINT_SELECTIVE && strstr(e2, "selective")) {
                            rc = 0; /* no core attention marked: no selective plans, said once */
                            no_core = true;
                            if (!strstr(out->skipped, "selective")) {
                                size_t n = strlen(out->skipped);
                                snprintf(out->skipped + n, sizeof(out->skipped) - n, "%s--checkpoint selective: %s", n ? "; " : "",
                                         "the model marks no core attention (GPT-2/NeoX configs do)");
                            }
                            break;
                        }
                        if (rc < 0 && pp > 1 && strstr(e2, "--pp")) {
                            rc = 0; /* a family whose stages are not built: no pipeline plans, said once */
                            no_core = true;
                            if (!strstr(out->skipped, "--pp")) {
                                size_t n = strlen(out->skipped);
                                snprintf(out->skipped + n, sizeof(out->skipped) - n, "%s--pp: %s", n ? "; " : "", e2);
                            }
                            break;
                        }
                        if (rc < 0) {
                            if (err && errlen) snprintf(err, errlen, "%s", e2);
                            break;
                        }
                        out->simulations += pp;
                        out->n_rows++;
                    }
                }
            }
        }
        free_rank(&r);
        if (rc < 0) break;
    }
    if (rc < 0) {
        memest_plan_free(out);
        return rc;
    }
    pareto(out);
    return 0;
}

void memest_plan_free(MemestPlan *p)
{
    if (!p) return;
    me_free(p->rows);
    p->rows = NULL;
    p->n_rows = 0;
}

const char *me_plan_ckpt_name(int checkpoint)
{
    return checkpoint == MEMEST_CHECKPOINT_LAYERS ? "layers" : checkpoint == MEMEST_CHECKPOINT_SELECTIVE ? "selective" : "none";
}

/* How to run a row: memest's own options for its timeline, and
 * Megatron-LM's / DeepSpeed's for a launch script */
void me_plan_flags(const MemestPlanRow *r, char *memest, size_t n1, char *megatron, size_t n2)
{
    static const char *const shard[] = { "ddp", "zero1", "zero2", "zero3" };
    char tp[32] = "", pp[48] = "", dp[48] = "", ck[32] = "", off[32] = "";
    if (r->tp > 1) snprintf(tp, sizeof(tp), " --tp %d%s", r->tp, r->sp ? " --sp" : "");
    if (r->pp > 1) snprintf(pp, sizeof(pp), " --pp %d --micro-batches %d", r->pp, r->micro_batches);
    if (r->dp > 1) snprintf(dp, sizeof(dp), " --gpus %d --shard %s", r->dp, shard[r->shard & 3]);
    if (r->checkpoint) snprintf(ck, sizeof(ck), " --checkpoint %s", me_plan_ckpt_name(r->checkpoint));
    if (r->offload) snprintf(off, sizeof(off), " --offload optimizer");
    snprintf(memest, n1, "%s%s%s%s%s", tp, pp, dp, ck, off);
    if (memest[0] == ' ') memmove(memest, memest + 1, strlen(memest));
    snprintf(megatron, n2, "--tensor-model-parallel-size %d --pipeline-model-parallel-size %d%s%s%s%s", r->tp, r->pp,
             r->sp ? " --sequence-parallel" : "",
             r->checkpoint == MEMEST_CHECKPOINT_LAYERS ? " --recompute-granularity full --recompute-method uniform --recompute-num-layers 1"
             : r->checkpoint == MEMEST_CHECKPOINT_SELECTIVE ? " --recompute-granularity selective" : "",
             r->dp > 1 && r->shard >= MEMEST_SHARD_ZERO1 ? " --use-distributed-optimizer" : "",
             r->offload ? " (the optimizer offloaded to the host: DeepSpeed's offload_optimizer, not a Megatron-LM option)" : "");
}

int memest_note_plan(MemestAnalysis *a, const MemestPlan *p)
{
    MemestPlanRow *rows = p->n_rows ? me_malloc(sizeof(*rows) * (size_t)p->n_rows) : NULL;
    if (p->n_rows && !rows) return ME_ENOMEM;
    if (rows) memcpy(rows, p->rows, sizeof(*rows) * (size_t)p->n_rows);
    memest_plan_free(&a->plan);
    a->plan = *p;
    a->plan.rows = rows;
    a->has_plan = true;
    return 0;
}
