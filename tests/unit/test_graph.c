/* The IR's helpers: module scopes (interning, parents, common ancestors),
 * the arena, and the string map's length-aware lookups and reservation.
 * Expected values are worked out by hand in the comments. */
#include <stdio.h>
#include <string.h>

#include "graph.h"

static int fails;

#define EXPECT(what, cond)                      \
    do {                                        \
        if (!(cond)) {                          \
            printf("FAIL %s\n", what);          \
            fails++;                            \
        }                                       \
    } while (0)

static int scope_of(const MeGraph *g, const char *name)
{
    for (int i = 0; i < g->nscopes; i++)
        if (!strcmp(g->scopes[i].name, name)) return i;
    return -1;
}

static void test_scopes(void)
{
    MeGraph g;
    me_graph_init(&g, "scopes");
    /* modules as torch.onnx names them; "layer1" only ever appears as a prefix */
    const char *mods[] = { "conv1", "layer1.0.conv1", "layer1.0.conv1", "layer1.0", "layer1.1.conv1", "fc", "conv1" };
    for (int i = 0; i < 7; i++) {
        int ni;
        me_graph_add_node(&g, "Relu", mods[i], 0, 0, &ni);
        g.n[ni].module = me_graph_strdup(&g, mods[i]);
    }
    EXPECT("scopes built", me_graph_scopes(&g) == 0);
    /* conv1, layer1, layer1.0, layer1.0.conv1, layer1.1, layer1.1.conv1, fc */
    EXPECT("seven scopes", g.nscopes == 7);
    int conv1 = scope_of(&g, "conv1"), l1 = scope_of(&g, "layer1"), l10 = scope_of(&g, "layer1.0");
    int l10c = scope_of(&g, "layer1.0.conv1"), l11 = scope_of(&g, "layer1.1"), l11c = scope_of(&g, "layer1.1.conv1");
    int fc = scope_of(&g, "fc");
    EXPECT("all found", conv1 >= 0 && l1 >= 0 && l10 >= 0 && l10c >= 0 && l11 >= 0 && l11c >= 0 && fc >= 0);
    EXPECT("a node named like an earlier one shares its scope", g.n[0].scope == conv1 && g.n[6].scope == conv1);
    EXPECT("node 3 is the container layer1.0", g.n[3].scope == l10);
    EXPECT("parents", g.scopes[l10c].parent == l10 && g.scopes[l10].parent == l1 && g.scopes[l1].parent == -1);
    EXPECT("parent before child", l1 < l10 && l10 < l10c && l1 < l11 && l11 < l11c);
    EXPECT("depths", g.scopes[l1].depth == 0 && g.scopes[l10].depth == 1 && g.scopes[l11c].depth == 2);
    EXPECT("children", g.scopes[l1].children == 2 && g.scopes[l10].children == 1 && g.scopes[fc].children == 0);
    EXPECT("common: siblings' parent", me_scope_common(&g, l10c, l11c) == l1);
    EXPECT("common: ancestor", me_scope_common(&g, l10c, l10) == l10 && me_scope_common(&g, l1, l11c) == l1);
    EXPECT("common: itself", me_scope_common(&g, fc, fc) == fc);
    EXPECT("common: none", me_scope_common(&g, fc, l10c) == -1);
    EXPECT("built once", me_graph_scopes(&g) == 0 && g.nscopes == 7);
    me_graph_free(&g);
}

static void test_arena(void)
{
    MeArena a = { 0 };
    char *s = me_arena_strndup(&a, "abcdef", 3);
    EXPECT("strndup", s && !strcmp(s, "abc"));
    void *p = me_arena_alloc(&a, 1), *q = me_arena_alloc(&a, 1);
    EXPECT("8-byte aligned", ((uintptr_t)p & 7) == 0 && ((uintptr_t)q & 7) == 0 && (char *)q - (char *)p == 8);
    /* a request above a quarter of the chunk gets a chunk of its own; the
     * current chunk stays open */
    char *big = me_arena_alloc(&a, 1 << 20), *after = me_arena_alloc(&a, 8);
    EXPECT("big", big && after && after == (char *)q + 8);
    memset(big, 1, 1 << 20);
    char *room = me_arena_reserve(&a, 5u << 20);
    EXPECT("reserve", room && me_arena_alloc(&a, 5u << 20) == room);
    EXPECT("earlier strings stay", !strcmp(s, "abc"));
    me_arena_free(&a);
    EXPECT("freed", !a.chunks && !a.left);
}

static void test_strmap(void)
{
    MeStrMap m = { 0 };
    EXPECT("empty", me_strmap_get_n(&m, "x", 1) == -1);
    EXPECT("reserve", me_strmap_reserve(&m, 1000) == 0 && m.cap == 2048);
    me_strmap_put(&m, "ab", 1);
    me_strmap_put(&m, "abc", 2);
    /* a key's first bytes are not the key: "abc" looked up as 2 bytes is "ab" */
    EXPECT("prefix", me_strmap_get_n(&m, "abc", 2) == 1 && me_strmap_get_n(&m, "abcd", 3) == 2);
    EXPECT("longer than any", me_strmap_get_n(&m, "abcde", 5) == -1 && me_strmap_get(&m, "a") == -1);
    me_strmap_put(&m, "ab", 7);
    EXPECT("replace", me_strmap_get(&m, "ab") == 7 && m.count == 2);
    static char keys[5000][8];
    for (int i = 0; i < 5000; i++) {
        snprintf(keys[i], sizeof(keys[i]), "k%d", i);
        me_strmap_put(&m, keys[i], i);
    }
    int bad = 0;
    for (int i = 0; i < 5000; i++) bad += me_strmap_get(&m, keys[i]) != i;
    EXPECT("grown past the reservation", !bad && m.count == 5002 && m.cap >= 2 * 5002);
    me_strmap_free(&m);
}

int main(void)
{
    test_scopes();
    test_arena();
    test_strmap();
    if (fails) printf("%d failed\n", fails);
    else printf("graph: all passed\n");
    return fails ? 1 : 0;
}
