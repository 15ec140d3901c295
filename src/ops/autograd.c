/* What PyTorch's autograd keeps for backward: each op's descriptor states
 * its rule (derivatives.yaml reduced to the tensors that cost memory) and,
 * in its family file, the extra tensors its forward keeps. */
#include <assert.h>

#include "ops.h"

MeAutograd me_autograd_rule(const MeNode *n, MemestTorch torch)
{
    const MeOpDesc *d = n->desc;
    if (!d) return ME_AG_NONE; /* an unknown op does not run */
    assert(d->autograd != ME_AG_UNSET); /* me_op_validate, checked by test_registry */
    return d->autograd == ME_AG_BY_ATTRS ? d->saved_rule(n, torch) : d->autograd;
}

bool me_autograd_torch_differs(const MeGraph *g)
{
    for (int i = 0; i < g->nn; i++)
        if (me_autograd_rule(&g->n[i], MEMEST_TORCH_1_13) != me_autograd_rule(&g->n[i], MEMEST_TORCH_2)) return true;
    return false;
}

uint64_t me_autograd_extra(const MeCtx *c, bool training)
{
    const MeOpDesc *d = c->n->desc;
    return d && d->saved_extra ? d->saved_extra(c, training) : 0;
}
