/* The safetensors header reader (src/load/safetensors.c):
 *   test_llm_headers DIR
 * DIR is made by tests/llm/craft_headers.py: headers-only checkpoints
 * (sparse files) and hostile headers, with DIR/manifest.json saying what
 * each must give: an error naming the file and tensor/key, or the logical
 * parameters, stored bytes, quantization and dtype worked out by the
 * script from the quantizers' layouts. In-memory cases follow. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <string.h>

#include "load/llm.h"
#include "util.h"

#include "../check.h"

static void manifest_case(const char *dir, const cJSON *e)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", dir, e->string);
    MeLlmConfig c;
    memset(&c, 0, sizeof(c));
    MeDiag d = { 0 };
    int rc = me_llm_read_weights(path, &c, &d);
    const cJSON *err = cJSON_GetObjectItem(e, "error");
    if (err) {
        CHECK(rc == ME_EINVAL, "%s: rc %d, want EINVAL (%s)", e->string, rc, d.msg);
        CHECK(strstr(d.msg, err->valuestring) != NULL, "%s: message '%s' lacks '%s'", e->string, d.msg, err->valuestring);
        /* the message names the file (an index case names a file inside the folder) */
        CHECK(strstr(d.msg, e->string) != NULL, "%s: message '%s' does not name the file", e->string, d.msg);
        CHECK(c.n_tensors == 0, "%s: %d tensors left after an error", e->string, c.n_tensors);
    } else {
        CHECK(rc == 0, "%s: %s", e->string, d.msg);
        uint64_t params, bytes;
        me_llm_tensor_totals(&c, &params, &bytes);
        double want_p = cJSON_GetObjectItem(e, "params")->valuedouble, want_b = cJSON_GetObjectItem(e, "bytes")->valuedouble;
        CHECK((double)params == want_p, "%s: params %llu, want %.0f", e->string, (unsigned long long)params, want_p);
        CHECK((double)bytes == want_b, "%s: bytes %llu, want %.0f", e->string, (unsigned long long)bytes, want_b);
        CHECK(c.n_tensors == cJSON_GetObjectItem(e, "tensors")->valueint, "%s: %d tensors", e->string, c.n_tensors);
        const char *q = cJSON_GetObjectItem(e, "quant")->valuestring;
        CHECK(!strcmp(me_llm_quant_name(c.quant), q), "%s: quant %s, want %s", e->string, me_llm_quant_name(c.quant), q);
        const char *dt = cJSON_GetObjectItem(e, "dtype")->valuestring;
        CHECK(!strcmp(me_dtype_name(c.dtype), dt), "%s: dtype %s, want %s", e->string, me_dtype_name(c.dtype), dt);
        const cJSON *bits = cJSON_GetObjectItem(e, "bits"), *group = cJSON_GetObjectItem(e, "group");
        if (bits) CHECK(c.quant_bits == bits->valueint, "%s: bits %d, want %d", e->string, c.quant_bits, bits->valueint);
        const cJSON *cf = cJSON_GetObjectItem(e, "config"); /* GGUF metadata */
        for (const cJSON *k = cf ? cf->child : NULL; k; k = k->next) {
            if (!strcmp(k->string, "family")) {
                CHECK(!strcmp(c.family, k->valuestring), "%s: family %s", e->string, c.family);
                continue;
            }
            if (!strcmp(k->string, "tied")) {
                CHECK(c.tied == cJSON_IsTrue(k), "%s: tied %d", e->string, c.tied);
                continue;
            }
            const struct { const char *key; int64_t v; } f[] = {
                { "layers", c.layers }, { "hidden", c.hidden }, { "heads", c.heads }, { "kv_heads", c.kv_heads },
                { "intermediate", c.intermediate }, { "vocab", c.vocab }, { "max_pos", c.max_pos },
            };
            bool known = false;
            for (size_t j = 0; j < sizeof(f) / sizeof(f[0]); j++)
                if (!strcmp(f[j].key, k->string)) {
                    known = true;
                    CHECK(f[j].v == (int64_t)k->valuedouble, "%s: %s %lld, want %.0f", e->string, k->string,
                          (long long)f[j].v, k->valuedouble);
                }
            CHECK(known, "%s: manifest key %s", e->string, k->string);
        }
        /* the config's layout count must be the headers' */
        MeDiag d2 = { 0 };
        CHECK(me_llm_check_weights(&c, params, &d2) == 0, "%s: %s", e->string, d2.msg);
        CHECK(me_llm_check_weights(&c, params + 1, &d2) == ME_EINVAL && strstr(d2.msg, "config describes"),
              "%s: a config one parameter off: %s", e->string, d2.msg);
        if (group) CHECK(c.quant_group == group->valueint, "%s: group %d, want %d", e->string, c.quant_group, group->valueint);
    }
    me_llm_tensors_free(&c);
}

/* 8-byte length + header text into buf; returns the bytes used. */
static size_t st_buf(char *buf, size_t cap, const char *hdr)
{
    size_t n = strlen(hdr);
    for (int i = 0; i < 8; i++) buf[i] = (char)((uint64_t)n >> (8 * i));
    snprintf(buf + 8, cap - 8, "%s", hdr);
    return n + 8;
}

static void memory_cases(void)
{
    char buf[512];
    MeDiag d = { 0 };
    MeLlmConfig c;
    memset(&c, 0, sizeof(c));
    /* the file size is what the reader trusts for "past the end": the same
     * header is fine at the right size, refused one byte short or long */
    size_t n = st_buf(buf, sizeof(buf), "{\"x\": {\"dtype\": \"BF16\", \"shape\": [3, 5], \"data_offsets\": [0, 30]}}");
    CHECK(me_safetensors_parse(&c, "m.safetensors", buf, n, n + 30, &d) == 0, "%s", d.msg);
    CHECK(c.n_tensors == 1 && c.tensors[0].bytes == 30 && c.tensors[0].params == 15 && c.tensors[0].dtype == ME_DT_BF16 &&
          c.tensors[0].shape.rank == 2 && c.tensors[0].shape.d[1] == 5, "one bf16 3x5 tensor");
    memset(&d, 0, sizeof(d));
    CHECK(me_safetensors_parse(&c, "m.safetensors", buf, n, n + 29, &d) == ME_EINVAL && strstr(d.msg, "past the end"),
          "short data: %s", d.msg);
    CHECK(c.n_tensors == 1, "an error leaves the tensors read before: %d", c.n_tensors);
    memset(&d, 0, sizeof(d));
    CHECK(me_safetensors_parse(&c, "m.safetensors", buf, n, n + 31, &d) == ME_EINVAL && strstr(d.msg, "holds 31 data bytes"),
          "long data: %s", d.msg);
    /* the header length counts, not the buffer: fewer bytes than it says */
    memset(&d, 0, sizeof(d));
    CHECK(me_safetensors_parse(&c, "m.safetensors", buf, n - 1, n + 30, &d) == ME_EINVAL, "truncated buffer");
    /* a scalar is one element; an empty dim none */
    n = st_buf(buf, sizeof(buf), "{\"s\": {\"dtype\": \"F32\", \"shape\": [], \"data_offsets\": [0, 4]},"
                                 " \"e\": {\"dtype\": \"F32\", \"shape\": [0, 7], \"data_offsets\": [4, 4]}}");
    memset(&d, 0, sizeof(d));
    CHECK(me_safetensors_parse(&c, "m.safetensors", buf, n, n + 4, &d) == 0, "%s", d.msg);
    CHECK(c.n_tensors == 3 && c.tensors[1].params == 1 && c.tensors[2].params == 0 && c.tensors[2].bytes == 0,
          "scalar and empty tensor");
    /* rank past ME_MAX_RANK */
    n = st_buf(buf, sizeof(buf), "{\"r\": {\"dtype\": \"U8\", \"shape\": [1,1,1,1,1,1,1,1,1], \"data_offsets\": [0, 1]}}");
    memset(&d, 0, sizeof(d));
    CHECK(me_safetensors_parse(&c, "m.safetensors", buf, n, n + 1, &d) == ME_EINVAL && strstr(d.msg, "'r': shape"),
          "rank 9: %s", d.msg);
    /* a name with a terminal escape is quoted escaped */
    n = st_buf(buf, sizeof(buf), "{\"a\\u001b[31m\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 8]}}");
    memset(&d, 0, sizeof(d));
    CHECK(me_safetensors_parse(&c, "m.safetensors", buf, n, n + 8, &d) == ME_EINVAL && !strchr(d.msg, '\x1b'),
          "escape in name: %s", d.msg);
    me_llm_tensors_free(&c);
}

int main(int argc, char **argv)
{
    memory_cases();
    if (argc < 2) {
        printf("usage: test_llm_headers DIR (from tests/llm/craft_headers.py)\n");
        return 1;
    }
    char path[4096];
    snprintf(path, sizeof(path), "%s/manifest.json", argv[1]);
    char *text = slurp(path, NULL);
    cJSON *man = text ? cJSON_Parse(text) : NULL;
    CHECK(man && cJSON_GetArraySize(man) > 30, "manifest %s", path);
    for (const cJSON *e = man ? man->child : NULL; e; e = e->next) manifest_case(argv[1], e);
    cJSON_Delete(man);
    snprintf(path, sizeof(path), "%s/llama3-8b-bf16", argv[1]);
    CHECK(me_llm_has_weights(path), "%s holds an index", path);
    CHECK(!me_llm_has_weights("/nonexistent"), "no folder, no weights");
    free(text);
    printf("%d checks, %d failed\n", checks, fails);
    return fails != 0;
}
