/* torch.einsum: what memest's plan of it cannot know, as a note.
 *
 * torch.onnx writes torch.einsum as one Einsum node. The timeline follows
 * the call as PyTorch runs it (ops/linear.c einsum_chain: permutes, sums,
 * reshape() copies, bmm or mul a pair of operands at a time, a strided
 * result; checked against PyTorch by tests/unit/test_einsum_plan.c). Two
 * things stay open, and the note names them:
 *   - a label repeated in one operand ("ii->i") takes a diagonal, which
 *     the plan does not follow: that call is one op (its output, and its
 *     operands kept with autograd on);
 *   - with three or more operands, torch.einsum (torch/functional.py, v1.13
 *     and 2.x) asks opt_einsum for the contraction order when that package
 *     is installed (torch.backends.opt_einsum.enabled); the plan contracts
 *     left to right, as PyTorch does without it, so the intermediates
 *     differ where it is installed. */
#include <string.h>

#include "canon/canon.h"
#include "ops/ops.h"

/* a label twice in one operand's term */
static bool repeats_label(const char *eq)
{
    bool seen[128] = { false };
    for (const char *p = eq; *p && *p != '-'; p++) {
        unsigned char ch = (unsigned char)*p;
        if (ch == ',') memset(seen, 0, sizeof(seen));
        else if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z')) {
            if (seen[ch]) return true;
            seen[ch] = true;
        }
    }
    return false;
}

int me_canon_einsum(MeGraph *g, MeDiag *d)
{
    (void)d;
    int diag = 0, many = 0;
    const char *first_diag = NULL, *first_many = NULL;
    for (int i = 0; i < g->nn; i++) {
        const MeNode *n = &g->n[i];
        if (!me_canon_is(g, n, "Einsum")) continue;
        const char *eq = me_attr_s(n, "equation", "");
        const char *where = n->module ? n->module : n->name;
        if (repeats_label(eq) && !diag++) first_diag = where;
        if (n->n_in >= 3 && !many++) first_many = where;
    }
    int rc = 0;
    if (diag) rc = me_canon_calls_note(g, "einsum", diag, first_diag, "torch.einsum call(s) repeating a label in one operand",
                                    ": PyTorch takes a diagonal view there and then contracts a pair of operands at a time "
                                    "(Linear.cpp einsum); memest runs such a call as one op (its output, and with autograd on "
                                    "its operands), so the peak can differ by up to the operands' size");
    if (rc >= 0 && many) rc = me_canon_calls_note(g, "einsum_path", many, first_many, "torch.einsum call(s) with three or more operands",
                                    ": memest contracts them left to right, as torch.einsum does without the opt_einsum "
                                    "package; where opt_einsum is installed, torch.einsum (1.13 and later) contracts in the "
                                    "order it picks (torch.backends.opt_einsum), whose intermediate tensors can be larger or "
                                    "smaller");
    return rc < 0 ? rc : 0;
}
