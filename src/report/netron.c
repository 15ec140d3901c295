/* Per-node figures as a JSON file to view beside the model in Netron:
 * one entry per report row, keyed by the node's name in the file. */
#include <cjson/cJSON.h>

#include "report/report.h"
#include "util.h"

/* As in the JSON report: counts above 2^53 would lose digits as numbers. */
static bool add_u64(cJSON *o, const char *k, uint64_t v)
{
    if (v > (UINT64_C(1) << 53)) {
        char buf[32];
        snprintf(buf, sizeof(buf), "%llu", (unsigned long long)v);
        return cJSON_AddStringToObject(o, k, buf) != NULL;
    }
    return cJSON_AddNumberToObject(o, k, (double)v) != NULL;
}

int memest_netron_metrics(const MemestAnalysis *model, FILE *f)
{
    if (!model || !f) return ME_EINVAL;
    if (me_analysis_current(model) < 0) return ME_ESTALE;
    cJSON *root = cJSON_CreateObject();
    cJSON *arr = root ? cJSON_AddArrayToObject(root, "metrics") : NULL;
    bool ok = arr != NULL;
    for (int r = 0; ok && r < model->n_rows; r++) {
        MeRowView rv;
        me_row_view(model, r, &rv);
        const MeCost *c = rv.cost;
        cJSON *o = cJSON_CreateObject();
        ok = o && cJSON_AddItemToArray(arr, o);
        if (!ok) {
            cJSON_Delete(o);
            break;
        }
        ok = cJSON_AddStringToObject(o, "name", rv.node->name) && cJSON_AddStringToObject(o, "module", rv.node->module) &&
             cJSON_AddStringToObject(o, "op", rv.node->op) && add_u64(o, "params", c->params) &&
             add_u64(o, "macs", c->macs) && add_u64(o, "flops", c->flops) && add_u64(o, "output_bytes", c->out_bytes);
    }
    char *s = ok ? cJSON_Print(root) : NULL;
    cJSON_Delete(root);
    if (!s) return ME_ENOMEM;
    fputs(s, f);
    fputc('\n', f);
    cJSON_free(s);
    return ferror(f) ? ME_EIO : 0;
}
