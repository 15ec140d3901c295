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

/* One rank's graph loaded for (tp, sp): its analysis for each of the
 * memory settings tried on it */
typedef struct Rank {
    MemestModel *m;
    MemestAnalysis *an;
    int64_t layers, hidden;
    MeDType act;
} Rank;

static int run_row(Rank *r, const MemestMemorySettings *base, const MemestGpu *gpu, int gpus, MemestPlanRow *row,
                   char *err, size_t errlen)
{
    MemestMemorySettings ms = *base;
    ms.record_series = 0;
    ms.checkpoint = row->checkpoint;
    ms.gpus = row->dp;
    ms.shard = row->dp > 1 ? row->shard : MEMEST_SHARD_DDP;
    int rc = memest_set_memory(r->an, &ms, err, errlen);
    if (rc < 0) return rc;
    row->needed = memest_memory_needed(r->an);
    const MeMemResult *mr = &r->an->memory;
    for (int k = 0; k < mr->n_mem; k++)
        if (mr->mem[k].peak_reserved > row->peak_reserved) row->peak_reserved = mr->mem[k].peak_reserved;
    row->fits = row->needed <= gpu->memory;
    MemestTiming t;
    if ((rc = memest_set_device(r->an, gpu, 0)) < 0 || (rc = memest_timing(r->an, &t)) < 0) {
        if (err && errlen) snprintf(err, errlen, "--plan needs the GPU's bandwidth and FLOP/s (a --gpu, not --gpu-mem alone)");
        return rc < 0 ? rc : ME_EINVAL;
    }
    /* the optimizer updates this rank's shard of the state under ZeRO */
    double opt = ms.shard >= MEMEST_SHARD_ZERO1 && row->dp > 1 ? t.optimizer_s / row->dp : t.optimizer_s;
    row->compute_s = t.forward_s + t.backward_s + t.recompute_s + opt;
    double link = gpu->link_bandwidth;
    double act = (double)t.batch * (double)r->an->model->kv_tokens * (double)r->hidden * me_dtype_size(r->act);
    if (row->tp > 1) {
        double passes = row->checkpoint == MEMEST_CHECKPOINT_LAYERS ? 6 : 4;
        row->tp_comm_s = (double)r->layers * passes * 2.0 * (row->tp - 1) / row->tp * act / link;
    }
    if (row->dp > 1) {
        /* this rank's gradients: its parameters in their dtype */
        double gb = (double)r->an->totals.params * me_dtype_size(r->act);
        double f = ms.shard == MEMEST_SHARD_ZERO3 ? 3.0 : 2.0;
        double bw = gpus > NODE_GPUS ? INTER_NODE_BW : link;
        row->dp_comm_s = f * (row->dp - 1) / row->dp * gb / bw;
    }
    row->step_s = row->compute_s + row->tp_comm_s + row->dp_comm_s;
    double tokens = (double)t.batch * (double)r->an->model->kv_tokens * row->dp;
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
                  int gpus, MemestPlan *out, char *err, size_t errlen);

/* gpus 0: the fewest GPUs for which a plan fits, among 1 to 8 and whole
 * nodes of 8 (doubling, then bisected between the last two) */
int memest_plan(const char *path, const MemestLoadSettings *ls, const MemestMemorySettings *mem, const MemestGpu *gpu,
                int gpus, MemestPlan *out, char *err, size_t errlen)
{
    if (gpus) return plan_n(path, ls, mem, gpu, gpus, out, err, errlen);
    int sims = 0, lo = 0, rc = 0;
    for (int n = 1; n <= ME_PLAN_MAX_GPUS; n = n < NODE_GPUS ? n + 1 : 2 * n) {
        if ((rc = plan_n(path, ls, mem, gpu, n, out, err, errlen)) < 0) return rc;
        sims += out->simulations;
        if (out->n_fit) {
            /* between lo and n GPUs (whole nodes): the fewest that fit */
            int hi = n;
            while (lo >= NODE_GPUS && hi - lo > NODE_GPUS) {
                int mid = (lo + hi) / 2 / NODE_GPUS * NODE_GPUS;
                MemestPlan t;
                if ((rc = plan_n(path, ls, mem, gpu, mid, &t, err, errlen)) < 0) break;
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
                  int gpus, MemestPlan *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof(*out));
    const char *why = NULL;
    if (!path || !me_llm_recognize(path, NULL, 0)) why = "applies to language models (a config.json or a model folder)";
    else if (mem->mode != MEMEST_RUN_TRAIN) why = "plans a training step (--train)";
    else if (gpus < 1 || gpus > ME_PLAN_MAX_GPUS) why = "plans from 1 to 4096 GPUs (--gpus N, the whole job's)";
    else if (ls->tp > 1 || ls->sp) why = "chooses the tensor parallelism itself (--tp/--sp bind nothing)";
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
        out->seq = r.m->kv_tokens;
        int dp = gpus / tp;
        int ckpts[3] = { 0, MEMEST_CHECKPOINT_LAYERS, MEMEST_CHECKPOINT_SELECTIVE };
        for (int ci = 0; ci < 3 && rc >= 0; ci++) {
            for (int z = MEMEST_SHARD_DDP; z <= MEMEST_SHARD_ZERO3 && rc >= 0; z++) {
                if (dp == 1 && z > MEMEST_SHARD_DDP) break;
                if (out->n_rows == cap) {
                    int nc = cap ? 2 * cap : 32;
                    MemestPlanRow *nr = me_realloc(out->rows, sizeof(*nr) * (size_t)nc);
                    if (!nr) { rc = ME_ENOMEM; break; }
                    out->rows = nr;
                    cap = nc;
                }
                MemestPlanRow *row = &out->rows[out->n_rows];
                *row = (MemestPlanRow){ .tp = tp, .sp = tp > 1, .dp = dp, .shard = z, .checkpoint = ckpts[ci] };
                rc = run_row(&r, mem, gpu, gpus, row, e2, sizeof(e2));
                if (rc < 0 && ckpts[ci] == MEMEST_CHECKPOINT_SELECTIVE && strstr(e2, "selective")) {
                    rc = 0; /* no core attention marked: no selective plans, said once */
                    if (!strstr(out->skipped, "selective")) {
                        size_t n = strlen(out->skipped);
                        snprintf(out->skipped + n, sizeof(out->skipped) - n, "%s--checkpoint selective: %s", n ? "; " : "",
                                 "the model marks no core attention (GPT-2/NeoX configs do)");
                    }
                    break;
                }
                if (rc < 0) {
                    if (err && errlen) snprintf(err, errlen, "%s", e2);
                    break;
                }
                out->simulations++;
                out->n_rows++;
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
    char tp[64] = "";
    if (r->tp > 1) snprintf(tp, sizeof(tp), "--tp %d%s ", r->tp, r->sp ? " --sp" : "");
    static const char *const shard[] = { "ddp", "zero1", "zero2", "zero3" };
    char dp[64] = "";
    if (r->dp > 1) snprintf(dp, sizeof(dp), "--gpus %d --shard %s ", r->dp, shard[r->shard & 3]);
    char ck[40] = "";
    if (r->checkpoint) snprintf(ck, sizeof(ck), "--checkpoint %s", me_plan_ckpt_name(r->checkpoint));
    snprintf(memest, n1, "%s%s%s", tp, dp, ck);
    size_t l = strlen(memest);
    while (l && memest[l - 1] == ' ') memest[--l] = 0;
    snprintf(megatron, n2, "--tensor-model-parallel-size %d --pipeline-model-parallel-size 1%s%s%s", r->tp,
             r->sp ? " --sequence-parallel" : "",
             r->checkpoint == MEMEST_CHECKPOINT_LAYERS ? " --recompute-granularity full --recompute-method uniform --recompute-num-layers 1"
             : r->checkpoint == MEMEST_CHECKPOINT_SELECTIVE ? " --recompute-granularity selective" : "",
             r->dp > 1 && r->shard >= MEMEST_SHARD_ZERO1 ? " --use-distributed-optimizer" : "");
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
