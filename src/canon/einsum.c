/* torch.einsum as PyTorch runs it: a note.
 *
 * torch.onnx writes torch.einsum as one Einsum node, and memest runs it as
 * one op: its output and, with autograd on, its operands. PyTorch
 * (aten/src/ATen/native/Linear.cpp, einsum and sumproduct_pair, v1.13 and
 * 2.x without opt_einsum) permutes each operand to a common label order,
 * then contracts them a pair at a time: each side permuted to (batch,
 * kept, summed) and reshape()d to 3-d for bmm, a copy whenever that
 * permutation cannot be viewed so, and bmm keeps the copies for backward;
 * the result is permuted to the output's order, a strided view whose
 * later reshape copies. Which operands copy depends on their strides and
 * the equation; the timeline does not follow it. The note says so, with
 * the bound: the operands' bytes. Held-out ho12's linear attention, three
 * einsums a block, is -4 % to -9 % in training. */
#include "canon/canon.h"

int me_canon_einsum(MeGraph *g, MeDiag *d)
{
    (void)d;
    int calls = 0;
    const char *first = NULL;
    for (int i = 0; i < g->nn; i++)
        if (me_canon_is(g, &g->n[i], "Einsum") && !calls++) first = g->n[i].module ? g->n[i].module : g->n[i].name;
    if (!calls) return 0;
    return me_canon_calls_note(g, "einsum", calls, first, "torch.einsum call(s)",
                               ": PyTorch runs each as permutes and, a pair of operands at a time, reshapes into bmm "
                               "(Linear.cpp sumproduct_pair), copying an operand whose permuted layout does not fold to 3-d "
                               "and, with autograd on, keeping the copies for backward; memest runs one op (its output, and "
                               "with autograd on its operands), so the peak can be higher by up to the operands' size");
}
