/* LoRA adapters: a transform of the canonical IR applied once at load
 * (after canonicalization, before shape inference) from
 * MemestLoadSettings.lora. doc/llm.md, "Fine-tuning". */
#ifndef MEMEST_LORA_H
#define MEMEST_LORA_H

#include "graph.h"

/* Parses spec ("r=8,alpha=16,targets=q_proj,v_proj[,dropout=P]" or
 * "targets=all-linear") and adds an adapter beside every Linear node
 * whose module's last component is a target; every other parameter is
 * frozen (ME_N_FROZEN). Re-finalizes g. Errors (exit 2 style) name the
 * key or the target. */
int me_lora_apply(MeGraph *g, const char *spec, MeDiag *d);
/* The note "lora": the adapters' and all parameters, once shape inference
 * has told parameters from buffers. */
int me_lora_note(MeGraph *g, const char *spec, MeDiag *d);

#endif
