#include "canon/canon.h"

/* A pass that changes nothing: keeps the table non-empty while the
 * recognizers live in their own files. */
int me_canon_none(MeGraph *g, MeDiag *d)
{
    (void)g;
    (void)d;
    return 0;
}

int me_canonicalize(MeGraph *g, MeDiag *d)
{
    static int (*const passes[])(MeGraph *, MeDiag *) = {
#define ME_CANON_FN(name) me_canon_##name,
        ME_CANON_PASSES(ME_CANON_FN)
#undef ME_CANON_FN
    };
    for (size_t i = 0; i < sizeof(passes) / sizeof(passes[0]); i++) {
        int rc = passes[i](g, d);
        if (rc < 0) return rc;
    }
    return 0;
}
