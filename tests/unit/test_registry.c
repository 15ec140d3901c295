/* The registry is sorted (lookup is a binary search), every descriptor is
 * complete, and versioned lookup picks the right entry. */
#include <stdio.h>
#include <string.h>

#include "ops/ops.h"

int main(void)
{
    int n, fails = 0;
    const MeOpDesc *const *ops = me_op_list(&n);
    for (int i = 0; i < n; i++) {
        const MeOpDesc *o = ops[i];
        if (!o->name || !o->infer || !o->cost || !o->roles || !o->roles[0] || o->since < 1) {
            printf("FAIL: descriptor %d (%s) has a missing hook or field\n", i, o->name ? o->name : "?");
            fails++;
        }
        if (o->min_in > o->max_in || o->min_out > o->max_out || o->max_out == 0) {
            printf("FAIL: %s arity is inconsistent\n", o->name);
            fails++;
        }
        if (i && (strcmp(ops[i - 1]->name, o->name) > 0 ||
                  (!strcmp(ops[i - 1]->name, o->name) && ops[i - 1]->since >= o->since))) {
            printf("FAIL: registry out of order at %s after %s\n", o->name, ops[i - 1]->name);
            fails++;
        }
        if (me_op_find(o->name, "", 23) == NULL) {
            printf("FAIL: %s not found by lookup\n", o->name);
            fails++;
        }
    }
    if (me_op_find("NoSuchOp", "", 17) || me_op_find("Conv", "com.example", 17)) {
        printf("FAIL: lookup of unknown op or domain succeeded\n");
        fails++;
    }
    if (!me_op_find("Conv", "ai.onnx", 17)) {
        printf("FAIL: ai.onnx domain should be the default domain\n");
        fails++;
    }
    printf("%d ops, %d failure(s)\n", n, fails);
    return fails != 0;
}
