/* Issue 10: what a re-binding of fixed dims tells the user, as graph notes
 * (code "rebound_dims"): the re-bound dims, the nodes whose constants were
 * re-written, and operands left at the export's size of 1 that broadcast
 * against a re-bound dim; and that the notes follow the binding (gone when
 * the model is bound back to its export's sizes).
 * usage: test_bind_notes SOURCE_ROOT */
#include <stdio.h>
#include <string.h>

#include "model.h"
#include "../check.h"

static MemestModel *load(const char *root, const char *stem, int64_t batch)
{
    char path[1024], err[1024] = "";
    snprintf(path, sizeof(path), "%s/models/onnx/static/%s.onnx", root, stem);
    MemestLoadSettings ls;
    memest_load_default_settings(&ls);
    ls.batch = batch;
    MemestModel *m = NULL;
    int rc = memest_model_load(&m, path, &ls, err, sizeof(err));
    CHECK(rc == 0 && m, "load %s: %s", stem, err);
    return m;
}

/* The notes of code "rebound_dims", joined. */
static const char *notes(const MemestModel *m, char *buf, size_t len)
{
    size_t n = 0;
    buf[0] = 0;
    for (int i = 0; i < m->g.nnotes && n < len; i++)
        if (!strcmp(m->g.notes[i].code, "rebound_dims")) n += (size_t)snprintf(buf + n, len - n, "%s\n", m->g.notes[i].text);
    return buf;
}

int main(int argc, char **argv)
{
    const char *root = argc > 1 ? argv[1] : ".";
    char buf[4096], err[1024];
    MemestModel *enc = load(root, "tiny_enc_static", 8), *pos = load(root, "tiny_pos_static", 8), *r18 = load(root, "resnet18_static", 0);
    if (!enc || !pos || !r18) return 1;
    notes(enc, buf, sizeof(buf));
    CHECK(strstr(buf, "input 'ids' dim 0 is 1 in the export, 8 here") && strstr(buf, "re-written in '/Reshape' (Reshape)") &&
          !strstr(buf, "broadcast"), "tiny_enc --batch 8: '%s'", buf);
    notes(pos, buf, sizeof(buf));
    CHECK(strstr(buf, "broadcast an operand the export fixed at size 1") && strstr(buf, "'/Add' (Add)"),
          "tiny_pos --batch 8 (the sliced position table stays [1, 64, 64]): '%s'", buf);
    CHECK(!*notes(r18, buf, sizeof(buf)), "resnet18 at its own batch: '%s'", buf);
    CHECK(memest_model_set_batch(r18, 4, err, sizeof(err)) == 0 && strstr(notes(r18, buf, sizeof(buf)), "dim 0 is 1 in the export, 4 here") &&
          strstr(buf, "no constant carries them"), "resnet18 set_batch 4: '%s' %s", buf, err);
    CHECK(memest_model_set_batch(r18, 1, err, sizeof(err)) == 0 && !*notes(r18, buf, sizeof(buf)), "resnet18 back at 1: '%s'", buf);
    memest_model_free(&enc);
    memest_model_free(&pos);
    memest_model_free(&r18);
    printf("%d checks, %d failures\n", checks, fails);
    return fails ? 1 : 0;
}
