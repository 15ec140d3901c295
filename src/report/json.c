/* JSON report, schema "memest-report" version 1 (doc/report-schema.md).
 * Keys come out in a fixed order so the output is deterministic. */
#include <cjson/cJSON.h>
#include <string.h>

#include "optim.h"
#include "report/report.h"

/* stands for the layers array in the printed root */
#define LAYERS_MARK "\x01memest-layers\x01"

static cJSON *shape_json(const MeValue *v)
{
    if (!v || !v->known) return cJSON_CreateNull();
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; a && i < v->shape.rank; i++) cJSON_AddItemToArray(a, cJSON_CreateNumber((double)v->shape.d[i]));
    return a;
}

/* Counts above 2^53 lose precision as JSON numbers: write those as strings. */
static void add_u64(cJSON *o, const char *k, uint64_t v)
{
    if (v > (UINT64_C(1) << 53)) {
        char buf[32];
        snprintf(buf, sizeof(buf), "%llu", (unsigned long long)v);
        cJSON_AddStringToObject(o, k, buf);
    } else {
        cJSON_AddNumberToObject(o, k, (double)v);
    }
}

/* --pp (doc/memory.md "Pipeline parallelism"): each stage's figures; the
 * steps above are the worst stage's one micro-batch */
static void add_pipeline(cJSON *mem, const MemestPipeline *p)
{
    cJSON *o = cJSON_AddObjectToObject(mem, "pipeline");
    cJSON_AddStringToObject(o, "schedule", "1F1B (Megatron-LM, non-interleaved)");
    cJSON_AddNumberToObject(o, "stages", p->stages);
    cJSON_AddNumberToObject(o, "micro_batches", p->micro_batches);
    cJSON_AddNumberToObject(o, "worst_stage", p->worst);
    add_u64(o, "needed", p->stage[p->worst].needed);
    cJSON_AddNumberToObject(o, "bubble", p->bubble);
    if (p->step_s > 0) cJSON_AddNumberToObject(o, "step_seconds", p->step_s);
    cJSON *a = cJSON_AddArrayToObject(o, "per_stage");
    for (int s = 0; s < p->stages; s++) {
        const MemestPipelineStage *st = &p->stage[s];
        cJSON *x = cJSON_CreateObject();
        cJSON_AddNumberToObject(x, "stage", s);
        cJSON_AddNumberToObject(x, "first_layer", st->first_layer);
        cJSON_AddNumberToObject(x, "layers", st->layers);
        cJSON_AddNumberToObject(x, "in_flight", st->in_flight);
        add_u64(x, "weights", st->weights);
        add_u64(x, "one_micro_batch", st->peak);
        add_u64(x, "one_micro_batch_forward_backward", st->backward_peak);
        add_u64(x, "held_per_micro_batch", st->held);
        add_u64(x, "gradients_from_earlier_micro_batches", st->grads_extra);
        add_u64(x, "needed", st->needed);
        if (st->compute_s > 0) cJSON_AddNumberToObject(x, "compute_seconds", st->compute_s);
        cJSON_AddItemToArray(a, x);
    }
}

/* A capacity answer (--max-batch, --max-seq): the value, what it and the
 * next one need, the timelines run */
static void add_capacity(cJSON *dev, const char *key, const char *what, int64_t x, uint64_t needed, uint64_t next, int sims)
{
    cJSON *o = cJSON_AddObjectToObject(dev, key);
    cJSON_AddNumberToObject(o, what, (double)x);
    add_u64(o, "needed", needed);
    add_u64(o, "needed_next", next);
    cJSON_AddNumberToObject(o, "simulations", sims);
}

static const char *status_name(uint8_t s)
{
    switch (s) {
    case ME_COST_OK: return "counted";
    case ME_COST_UNCOUNTED: return "uncounted";
    case ME_COST_UNKNOWN_OP: return "unknown_op";
    default: return "unknown_shape";
    }
}

static cJSON *op_counts_json(const MemestAnalysis *m, MeCostStatus st)
{
    const char *ops[256];
    int counts[256];
    int k = me_op_counts(m, st, ops, counts, 256);
    cJSON *o = cJSON_CreateObject();
    for (int i = 0; o && i < k; i++) cJSON_AddNumberToObject(o, ops[i], counts[i]);
    return o;
}

/* One row as cJSON_Print would write it two levels deep. */
static cJSON *layer_json(const MemestAnalysis *m, int r)
{
    const MeGraph *g = m->g;
    MeRowView rv;
    me_row_view(m, r, &rv);
    const MeNode *n = rv.node;
    const MeCost *c = rv.cost;
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    cJSON_AddStringToObject(o, "name", n->module);
    cJSON_AddStringToObject(o, "node", n->name);
    cJSON_AddStringToObject(o, "op", n->op);
    const MeValue *in = NULL;
    for (int i = 0; i < n->n_in && !in; i++)
        if (n->in[i] >= 0 && g->v[n->in[i]].kind != ME_V_INIT) in = &g->v[n->in[i]];
    cJSON_AddItemToObject(o, "input_shape", shape_json(in));
    cJSON_AddItemToObject(o, "output_shape", shape_json(n->n_out && n->out[0] >= 0 ? &g->v[n->out[0]] : NULL));
    cJSON *outs = cJSON_AddArrayToObject(o, "outputs");
    for (int k = 0; k < n->n_out; k++) {
        if (n->out[k] < 0) continue;
        cJSON *ov = cJSON_CreateObject();
        cJSON_AddStringToObject(ov, "name", g->v[n->out[k]].name);
        cJSON_AddStringToObject(ov, "dtype", me_dtype_name(g->v[n->out[k]].dtype));
        cJSON_AddItemToObject(ov, "shape", shape_json(&g->v[n->out[k]]));
        cJSON_AddItemToArray(outs, ov);
    }
    add_u64(o, "params", c->params);
    add_u64(o, "output_bytes", c->out_bytes);
    add_u64(o, m->conv == MEMEST_CONVENTION_TORCHSTAT ? "madd" : "macs", c->macs);
    add_u64(o, "flops", c->flops);
    add_u64(o, "mem_read", c->read);
    add_u64(o, "mem_write", c->write);
    cJSON_AddStringToObject(o, "status", status_name(c->status));
    return o;
}

/* "layers": [{...}, {...}] in cJSON_Print's layout: each row printed on
 * its own, two tabs deeper. */
static int write_layers(const MemestAnalysis *m, FILE *f)
{
    fputc('[', f);
    for (int r = 0; r < m->n_rows; r++) {
        cJSON *o = layer_json(m, r);
        char *txt = o ? cJSON_Print(o) : NULL;
        cJSON_Delete(o);
        if (!txt) return ME_ENOMEM;
        if (r) fputs(", ", f);
        for (const char *p = txt, *nl; *p; p = nl + 1) {
            nl = strchr(p, '\n');
            if (!nl) {
                fputs(p, f);
                break;
            }
            fwrite(p, 1, (size_t)(nl - p + 1), f);
            fputs("\t\t", f);
        }
        cJSON_free(txt);
    }
    fputc(']', f);
    return 0;
}

int me_report_json(const MemestAnalysis *m, FILE *f)
{
    const MeGraph *g = m->g;
    cJSON *root = cJSON_CreateObject();
    if (!root) return ME_ENOMEM;
    cJSON_AddStringToObject(root, "schema", "memest-report");
    cJSON_AddNumberToObject(root, "version", 1);
    cJSON_AddStringToObject(root, "memest", memest_version());
    cJSON_AddStringToObject(root, "model", g->path);
    cJSON_AddStringToObject(root, "convention", memest_convention_name(m->conv));
    cJSON_AddNumberToObject(root, "opset", g->opset);
    cJSON *ins = cJSON_AddArrayToObject(root, "inputs");
    for (int i = 0; i < g->n_inputs; i++) {
        const MeValue *v = &g->v[g->inputs[i]];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "name", v->name);
        cJSON_AddStringToObject(o, "dtype", me_dtype_name(v->dtype));
        cJSON_AddItemToObject(o, "shape", shape_json(v));
        cJSON_AddItemToArray(ins, o);
    }
    /* The layers are streamed one at a time (a million-row cJSON tree
     * would take gigabytes); a placeholder marks their place in root. */
    cJSON_AddStringToObject(root, "layers", LAYERS_MARK);
    const MemestTotals *t = &m->totals;
    cJSON *tot = cJSON_AddObjectToObject(root, "totals");
    add_u64(tot, "params", t->params);
    add_u64(tot, "param_bytes", t->param_bytes);
    add_u64(tot, "buffers", t->buffers);
    add_u64(tot, m->conv == MEMEST_CONVENTION_TORCHSTAT ? "madd" : "macs", t->macs);
    add_u64(tot, "flops", t->flops);
    add_u64(tot, "mem_read", t->mem_read);
    add_u64(tot, "mem_write", t->mem_write);
    add_u64(tot, "output_bytes", t->output_bytes);
    add_u64(tot, "seed_sum_bytes", t->seed_sum_bytes);
    cJSON_AddNumberToObject(tot, "nodes", t->nodes);
    uint64_t kv_tok, kv_n, kv_b;
    if (me_llm_kv(m->model, &kv_tok, &kv_n, &kv_b)) { /* doc/llm.md */
        cJSON *kv = cJSON_AddObjectToObject(root, "kv_cache");
        add_u64(kv, "bytes_per_token", kv_tok);
        add_u64(kv, "tokens", kv_n);
        add_u64(kv, "bytes", kv_b);
        uint64_t nb, bt, bb;
        if (me_llm_kv_blocks(m->model, &nb, &bt, &bb)) {
            add_u64(kv, "block_tokens", bt);
            add_u64(kv, "blocks", nb);
            add_u64(kv, "block_bytes", bb);
        }
    }
    if (m->has_memory) {
        const MemestMemorySettings *ms = &m->memory.settings;
        cJSON *mem = cJSON_AddObjectToObject(root, "memory");
        cJSON_AddStringToObject(mem, "mode", me_mode_key(ms->mode));
        cJSON_AddStringToObject(mem, "module_mode", me_module_mode(ms));
        if (ms->torch != MEMEST_TORCH_1_13) /* 1.13, the default, is not printed */
            cJSON_AddStringToObject(mem, "torch", memest_torch_name((MemestTorch)ms->torch));
        if (ms->mode == MEMEST_RUN_TRAIN) {
            cJSON_AddStringToObject(mem, "optimizer", me_optimizer_name(ms->optimizer));
            MemestOptimizerImpl impl = memest_optimizer_impl_of(ms);
            if (impl != MEMEST_OPT_IMPL_SINGLE) /* the 1.13 default path is not printed */
                cJSON_AddStringToObject(mem, "optimizer_impl", memest_optimizer_impl_name(impl));
            if (me_optimizer_paged(ms->optimizer))
                cJSON_AddStringToObject(mem, "optimizer_paged",
                                        "at_peak.optimizer_paged is CUDA unified memory (bitsandbytes' paged state): counted as resident "
                                        "device memory in the peak, allocated and reserved, which torch.cuda's counters do not see; "
                                        "it pages to host when the device runs short");
            cJSON_AddStringToObject(mem, "loss", memest_loss_name(ms->loss));
        }
        cJSON_AddStringToObject(mem, "runtime", ms->runtime == MEMEST_RUNTIME_CPU ? "cpu" : "cuda");
        cJSON_AddStringToObject(mem, "autocast", me_autocast_key(ms->amp));
        cJSON_AddStringToObject(mem, "predicts", ms->runtime == MEMEST_RUNTIME_CPU ? "peak of CPU allocator bytes" : "torch.cuda max_memory_allocated / max_memory_reserved");
        if (ms->gpus > 1) {
            /* the figures are one rank's: a reader must not take them for the whole job */
            cJSON_AddNumberToObject(mem, "gpus", ms->gpus);
            cJSON_AddStringToObject(mem, "shard", me_shard_name(ms->shard));
            cJSON_AddStringToObject(mem, "per_gpu", "every figure in steps is what one of the GPUs holds");
        }
        if (ms->offload) cJSON_AddStringToObject(mem, "offload", ms->offload == MEMEST_OFFLOAD_PARAMS ? "params" : "optimizer");
        if (!m->memory.n_mem) cJSON_AddStringToObject(mem, "skipped", m->memory.skipped);
        if (m->memory.assumed[0]) cJSON_AddStringToObject(mem, "assumed", m->memory.assumed);
        cJSON *steps = cJSON_AddArrayToObject(mem, "steps");
        for (int k = 0; k < m->memory.n_mem; k++) {
            const MemestMemory *r = &m->memory.mem[k];
            cJSON *o = cJSON_CreateObject();
            cJSON_AddNumberToObject(o, "step", k + 1);
            add_u64(o, "peak", r->peak_allocated);
            add_u64(o, "peak_requested", r->peak);
            if (ms->runtime == MEMEST_RUNTIME_CUDA) {
                add_u64(o, "peak_reserved", r->peak_reserved);
                add_u64(o, "cuda_context_estimate", r->cuda_context);
                add_u64(o, "nvidia_smi", r->nvidia_smi);
            }
            add_u64(o, "baseline", r->baseline);
            add_u64(o, "end", r->end);
            cJSON_AddStringToObject(o, "peak_at", r->peak_name);
            cJSON_AddStringToObject(o, "peak_phase", me_phase_name(r->peak_phase));
            cJSON_AddNumberToObject(o, "checkpoint_segments", r->segments);
            add_u64(o, "recompute_macs", r->recompute_macs);
            if (ms->mode == MEMEST_RUN_TRAIN) add_u64(o, "forward_end", r->forward_end);
            if (r->peak_frames) add_u64(o, "peak_if_all_named", r->peak_frames); /* memest.h: the bound */
            if (ms->offload) add_u64(o, "host", r->host); /* ZeRO-Offload: never on the GPU */
            cJSON *cat = cJSON_AddObjectToObject(o, "at_peak");
            for (int c = 0; c < MEMEST_MEM_COUNT; c++)
                if (c != MEMEST_MEM_OPTIMIZER_PAGED || me_optimizer_paged(ms->optimizer)) /* only paged optimizers have the line */
                    add_u64(cat, memest_mem_category_name((MemestMemCategory)c), r->at_peak[c]);
            cJSON_AddItemToArray(steps, o);
        }
        if (m->has_pipeline) add_pipeline(mem, &m->pipeline);
    }
    if (m->has_gpu) {
        cJSON *dev = cJSON_AddObjectToObject(root, "device");
        cJSON_AddStringToObject(dev, "gpu", m->gpu.name);
        add_u64(dev, "memory", m->gpu.memory);
        if (m->has_memory && m->memory.n_mem) {
            uint64_t need = memest_memory_needed(m);
            add_u64(dev, "needed", need);
            cJSON_AddBoolToObject(dev, "fits", need <= m->gpu.memory);
        }
        MemestTiming timing;
        const char *no_roof = me_roofline_missing(m);
        if (no_roof) {
            cJSON_AddNullToObject(dev, "roofline_seconds");
            cJSON_AddStringToObject(dev, "roofline_skipped", no_roof);
        } else if (memest_timing(m, &timing) == 0) {
            cJSON *tm = cJSON_AddObjectToObject(dev, "roofline_seconds");
            cJSON_AddNumberToObject(tm, "forward", timing.forward_s);
            cJSON_AddNumberToObject(tm, "backward", timing.backward_s);
            cJSON_AddNumberToObject(tm, "recompute", timing.recompute_s);
            cJSON_AddNumberToObject(tm, "optimizer", timing.optimizer_s);
            cJSON_AddNumberToObject(tm, "step", timing.step_s);
            cJSON_AddNumberToObject(dev, "samples_per_second", timing.samples_per_s);
            MeLlmRate rate;
            if (me_llm_tokens(m->model, &m->gpu, timing.step_s, &rate)) { /* doc/llm.md */
                cJSON_AddNumberToObject(dev, "tokens_per_second", rate.tokens_per_s);
                if (rate.decode_bound_tokens_per_s > 0)
                    cJSON_AddNumberToObject(dev, "decode_bandwidth_bound_tokens_per_second", rate.decode_bound_tokens_per_s);
            }
        }
        if (m->has_max_batch)
            add_capacity(dev, "max_batch", "batch", m->max_batch.batch, m->max_batch.needed, m->max_batch.needed_next,
                         m->max_batch.simulations);
        if (m->has_max_seq)
            add_capacity(dev, "max_seq", "seq", m->max_seq.seq, m->max_seq.needed, m->max_seq.needed_next, m->max_seq.simulations);
        if (m->has_concurrency) { /* doc/llm.md "Serving" */
            const MemestConcurrency *c = &m->concurrency;
            cJSON *o = cJSON_AddObjectToObject(dev, "max_concurrency");
            cJSON_AddNumberToObject(o, "len", (double)c->settings.len);
            cJSON_AddNumberToObject(o, "seqs", (double)c->seqs);
            cJSON_AddBoolToObject(o, "capped_by_max_num_seqs", c->capped);
            cJSON_AddBoolToObject(o, "confirmed", c->confirmed);
            cJSON_AddNumberToObject(o, "gpu_memory_utilization", c->settings.gpu_memory_utilization);
            cJSON_AddNumberToObject(o, "max_num_batched_tokens", (double)c->settings.max_num_batched_tokens);
            cJSON_AddNumberToObject(o, "max_num_seqs", (double)c->settings.max_num_seqs);
            cJSON_AddNumberToObject(o, "profile_seqs", (double)c->profile_seqs);
            cJSON_AddNumberToObject(o, "profile_tokens", (double)c->profile_tokens);
            add_u64(o, "budget", c->budget);
            add_u64(o, "weights", c->weights);
            add_u64(o, "activation_peak", c->activation_peak);
            add_u64(o, "cuda_context", c->context);
            add_u64(o, "block_bytes", c->block_bytes);
            cJSON_AddNumberToObject(o, "block_tokens", (double)c->block_tokens);
            cJSON_AddNumberToObject(o, "blocks", (double)c->blocks);
            cJSON_AddNumberToObject(o, "blocks_per_seq", (double)c->blocks_per_seq);
            add_u64(o, "needed", c->needed);
            add_u64(o, "needed_next", c->needed_next);
            cJSON_AddNumberToObject(o, "simulations", c->simulations);
            double tps = me_concurrency_decode_bound(c, m->gpu.bandwidth);
            if (tps > 0) cJSON_AddNumberToObject(o, "decode_bandwidth_bound_tokens_per_second", tps);
        }
        if (m->has_plan) { /* doc/memory.md "Plans" */
            const MemestPlan *p = &m->plan;
            cJSON *o = cJSON_AddObjectToObject(dev, "plan");
            cJSON_AddNumberToObject(o, "gpus", p->gpus);
            cJSON_AddNumberToObject(o, "link_bandwidth", p->gpu.link_bandwidth);
            cJSON_AddNumberToObject(o, "micro_batch", (double)p->micro_batch);
            cJSON_AddNumberToObject(o, "seq", (double)p->seq);
            cJSON_AddNumberToObject(o, "micro_batches", p->micro_batches);
            cJSON_AddNumberToObject(o, "simulations", p->simulations);
            cJSON_AddNumberToObject(o, "fit", p->n_fit);
            if (p->fewest) cJSON_AddBoolToObject(o, "fewest_gpus", true);
            if (p->skipped[0]) cJSON_AddStringToObject(o, "not_planned", p->skipped);
            cJSON *rows = cJSON_AddArrayToObject(o, "rows");
            for (int i = 0; i < p->n_rows; i++) {
                const MemestPlanRow *r = &p->rows[i];
                cJSON *x = cJSON_CreateObject();
                cJSON_AddItemToArray(rows, x);
                cJSON_AddNumberToObject(x, "tp", r->tp);
                cJSON_AddBoolToObject(x, "sp", r->sp);
                cJSON_AddNumberToObject(x, "pp", r->pp);
                cJSON_AddNumberToObject(x, "dp", r->dp);
                cJSON_AddNumberToObject(x, "zero_stage", r->dp > 1 ? r->shard : 0);
                cJSON_AddStringToObject(x, "checkpoint", me_plan_ckpt_name(r->checkpoint));
                cJSON_AddStringToObject(x, "offload", r->offload ? "optimizer" : "none");
                add_u64(x, "needed", r->needed);
                add_u64(x, "peak_reserved", r->peak_reserved);
                cJSON_AddBoolToObject(x, "fits", r->fits);
                cJSON_AddBoolToObject(x, "pareto", r->pareto);
                cJSON_AddNumberToObject(x, "compute_seconds", r->compute_s);
                cJSON_AddNumberToObject(x, "tp_comm_seconds", r->tp_comm_s);
                cJSON_AddNumberToObject(x, "pp_comm_seconds", r->pp_comm_s);
                cJSON_AddNumberToObject(x, "dp_comm_seconds", r->dp_comm_s);
                cJSON_AddNumberToObject(x, "step_seconds", r->step_s);
                cJSON_AddNumberToObject(x, "tokens_per_second", r->tokens_per_s);
                char a[160], b[256];
                me_plan_flags(r, a, sizeof(a), b, sizeof(b));
                cJSON_AddStringToObject(x, "memest_options", a);
                cJSON_AddStringToObject(x, "megatron_args", b);
            }
        }
    }
    /* Constant nodes are data, not rows; their outputs are named here. */
    cJSON *consts = cJSON_AddArrayToObject(root, "constants");
    for (int i = 0; i < g->nn; i++)
        if (me_node_is_constant(&g->n[i]) && g->n[i].n_out && g->n[i].out[0] >= 0)
            cJSON_AddItemToArray(consts, cJSON_CreateString(g->v[g->n[i].out[0]].name));
    /* Values inside the chains canonicalization replaced by the one op
     * PyTorch ran (src/canon): the file names them, nothing makes them now. */
    cJSON *cv = NULL;
    for (int i = 0; i < g->nv; i++)
        if (g->v[i].kind == ME_V_ACT && g->v[i].producer < 0 && !g->v[i].n_uses && !g->v[i].is_output &&
            (cv || (cv = cJSON_AddArrayToObject(root, "canonicalized_values"))))
            cJSON_AddItemToArray(cv, cJSON_CreateString(g->v[i].name));
    cJSON *cw[2] = { NULL, NULL };
    static const char *const held[2] = { "constant_weights", "constant_buffers" };
    for (int i = 0; i < g->nv; i++) {
        int b = g->v[i].role == ME_R_BUFFER;
        if (g->v[i].from_constant && g->v[i].n_uses && (cw[b] || (cw[b] = cJSON_AddArrayToObject(root, held[b]))))
            cJSON_AddItemToArray(cw[b], cJSON_CreateString(g->v[i].name));
    }
    cJSON *notes = cJSON_AddArrayToObject(root, "notes");
    const char *text, *code;
    for (int i = 0; notes && (text = memest_note_text(m, i, &code)); i++) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "code", code);
        cJSON_AddStringToObject(o, "text", text);
        cJSON_AddItemToArray(notes, o);
    }
    cJSON_AddItemToObject(root, "unknown_ops", op_counts_json(m, ME_COST_UNKNOWN_OP));
    cJSON_AddItemToObject(root, "uncounted_ops", op_counts_json(m, ME_COST_UNCOUNTED));
    char *s = cJSON_Print(root);
    cJSON_Delete(root);
    if (!s) return ME_ENOMEM;
    const char *mark = strstr(s, "\"\\u0001memest-layers\\u0001\"");
    int rc = 0;
    if (!mark) {
        rc = ME_ENOMEM; /* the placeholder failed to be added */
    } else {
        fwrite(s, 1, (size_t)(mark - s), f);
        rc = write_layers(m, f);
        if (rc >= 0) {
            fputs(strchr(mark + 1, '"') + 1, f);
            fputc('\n', f);
        }
    }
    cJSON_free(s);
    return rc;
}
