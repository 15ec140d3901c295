/* What torch.onnx's torch.export-based exporter (dynamo=True, the default
 * of torch.onnx.export since torch 2.9) states beside the ops, which its
 * TorchScript-based predecessor spelled in node names: each node's module
 * calls, and which stored tensors are parameters. Only the ONNX loader
 * calls these; what they make is what a TorchScript export gives, so no
 * later stage knows which exporter wrote the file. */
#ifndef MEMEST_LOAD_ONNX_TORCH_H
#define MEMEST_LOAD_ONNX_TORCH_H

#include "graph.h"

#define ME_TORCH_MAX_DEPTH 64 /* module nesting read from one node's metadata */

/* The metadata keys (torch/onnx/_internal/exporter/_core.py) */
#define ME_TORCH_NAME_SCOPES "pkg.torch.onnx.name_scopes"
#define ME_TORCH_SIGNATURE "pkg.torch.export.ExportedProgram.graph_signature"

/* The module calls open at the previous node, and how often each module
 * has been called: a module called again (torchvision's BasicBlock calls
 * self.relu twice) is a new call, which TorchScript names "relu_1". */
typedef struct MeTorchScopes {
    MeStrMap calls; /* module path (in the graph's arena) -> calls so far */
    struct { const char *path; int inst; } open[ME_TORCH_MAX_DEPTH];
    int nopen;
} MeTorchScopes;

/* From the value of a node's pkg.torch.onnx.name_scopes (the repr() of a
 * Python list of str), the name TorchScript's exporter would have given
 * the node ("/layer1/0/relu_1/relu"), in g's arena, in *out; *out NULL
 * when the value is not such a list. Nodes must come in file order
 * (execution order). 0 or ME_ENOMEM. */
int me_torch_scoped_name(MeGraph *g, MeTorchScopes *ts, const char *v, size_t len, char **out);
void me_torch_scopes_free(MeTorchScopes *ts);
/* "/name" in g's arena: how TorchScript names an op of the root forward;
 * NULL: no memory */
char *me_torch_root_name(MeGraph *g, const char *name);

/* The ExportedProgram's graph signature (a ModelProto metadata value):
 * the stored tensors it lists as buffers or constants are known not to be
 * parameters, the ones it lists as parameters known to be; g's stored
 * tensors must be loaded. Returns how many stored tensors it named. */
int me_torch_signature(MeGraph *g, const char *sig, size_t len);

/* The torch.__version__ that wrote the file (ModelProto.producer_version
 * where producer_name is "pytorch"): recorded in g, with a note when it
 * is 2 or later. 0 or ME_ENOMEM. */
int me_torch_version(MeGraph *g, const char *version);

#endif
