/* memest's options, once. The parser (main.c), --help and the man page
 * (memest.1, written at build time by mkman.c) all read this table, so
 * they cannot drift apart; tests/test_issue12_cli12.py holds README's
 * option table to them.
 *
 * X(ID, NAME, ARG, MANY, NEEDS, HELP)
 *   ID     OPT_ID in the enum below; OPT_BIT(ID) in a set of options
 *   NAME   as typed
 *   ARG    the value's placeholder; NULL for a flag
 *   MANY   1: may be given more than once (each adds); 0: given twice
 *          with two values is an error naming both
 *   NEEDS  the options of which one must be given too, 0 for none: without
 *          them the option would bind nothing, which is an error
 *   HELP   --help's text; '\n' starts a continuation line
 *
 * One rule, for every option: an option that binds nothing (NEEDS), that
 * conflicts with another (MEMEST_OPTION_CONFLICTS) or that is given twice
 * with two values is an error (exit 2) naming both. The library applies the
 * same rule to what only the model can tell (a --dim no input has, a batch
 * the model fixes): src/load/bind.c. */
#ifndef MEMEST_CLI_OPTIONS_H
#define MEMEST_CLI_OPTIONS_H

#include <stdint.h>

#define MEMEST_OPTIONS(X)                                                                                        \
    X(INPUT, "--input", "[NAME=]SHAPE[:DTYPE]", 1, 0,                                                            \
      "input shape, e.g. 3x224x224 (one sample; the batch\n"                                                    \
      "is prepended) or input_ids=8x128:int64 (full shape)")                                                     \
    X(BATCH, "--batch", "N", 0, 0, "batch size (default 1)")                                                    \
    X(DIM, "--dim", "NAME=N", 1, 0, "bind a symbolic dimension")                                                 \
    X(SEQ, "--seq", "S", 0, 0, "language models (config.json): prompt tokens (default 2048)")                 \
    X(NEW_TOKENS, "--new-tokens", "N", 0, 0,                                                                     \
      "language models: tokens generated after the prompt; the timeline\n"                                      \
      "is then the last decode step's (the cache at its longest)")                                               \
    X(KV_CACHE, "--kv-cache", "KIND", 0, 0,                                                                      \
      "language models: dynamic (torch.cat) | static (preallocated) |\n"                                        \
      "paged (vLLM: blocks of 16 tokens, read by its flash kernel)")                                             \
    X(ATTN, "--attn", "KIND", 0, 0,                                                                              \
      "language models: eager | sdpa (F.scaled_dot_product_attention) |\n"                                      \
      "flash (flash_attention_2); default eager, flash when paged")                                               \
    X(WEIGHTS, "--weights", "T", 0, 0,                                                                          \
      "language models: fp32 | fp16 | bf16 | int8 | int4 | nf4 | nf4-dq | fp8:\n"                               \
      "the weights as a loader makes them (default: as stored)")                                                 \
    X(KV_DTYPE, "--kv-dtype", "T", 0, 0, "language models: fp16 | bf16 | fp8, the KV cache's storage")         \
    X(CONVENTION, "--convention", "NAME", 0, 0, "default | torchstat | fvcore | ptflops | thop | deepspeed")     \
    X(FORMAT, "--format", "NAME", 0, 0, "table | json | csv | markdown")                                         \
    X(STRICT, "--strict", NULL, 0, 0, "unknown ops are an error (exit 3)")                                       \
    X(TRAIN, "--train", NULL, 0, 0, "simulate a training step (default: inference under no_grad)")              \
    X(GRAD, "--grad", NULL, 0, 0, "inference with autograd on (no torch.no_grad())")                             \
    X(OPTIMIZER, "--optimizer", "NAME", 0, OPT_BIT(TRAIN),                                                       \
      "sgd | momentum | adam | adamw | adagrad | rmsprop | none | adafactor\n"                                   \
      "| adamw8bit | paged_adamw | paged_adamw8bit (default sgd; none: backward\n"                               \
      "only, gradients kept; adafactor: HF transformers' defaults; *8bit, paged_*:\n"                           \
      "bitsandbytes, paged state in CUDA unified memory)")                                                     \
    X(OPTIMIZER_IMPL, "--optimizer-impl", "IMPL", 0, OPT_BIT(TRAIN),                                             \
      "single | foreach | fused | default: torch.optim's update path (default:\n"                               \
      "as foreach=None picks, single in torch 1.13, foreach on CUDA in 2;\n"                                    \
      "foreach: sgd, momentum, adam, adamw, and adagrad, rmsprop in 2;\n"                                       \
      "fused: adam, and sgd, momentum, adamw in 2; CUDA)")                                                       \
    X(TORCH, "--torch", "VERSION", 0, 0,                                                                        \
      "1.13 | 2: the PyTorch whose code the timeline follows where they\n"                                      \
      "differ (default: the file's, 2 for a file torch >= 2 wrote or\n"                                          \
      "one calling scaled_dot_product_attention, else 1.13; 2: MHA runs\n"                                      \
      "scaled_dot_product_attention, mean over dims saves no input,\n"                                          \
      "optimizers foreach by default on CUDA, in-place denominators)")                                           \
    X(LOSS, "--loss", "NAME", 0, OPT_BIT(TRAIN),                                                                 \
      "cross-entropy | mse | mean | sum | none | pow2-mean (default\n"                                        \
      "cross-entropy; none: out.backward(grad) with a ones-like grad;\n"                                         \
      "pow2-mean: out.float().pow(2).mean())")                                                                   \
    X(RUNTIME, "--runtime", "NAME", 0, 0, "cuda | cpu: what PyTorch allocates inside ops (default cuda)")        \
    X(CPU_THREADS, "--cpu-threads", "N", 0, OPT_BIT(RUNTIME),                                                    \
      "--runtime cpu: torch.get_num_threads() of the run (oneDNN's\n"                                         \
      "per-thread scratch; default 2, the threads of memest's CPU truth)")                                   \
    X(CPU_ISA, "--cpu-isa", "ISA", 0, OPT_BIT(RUNTIME),                                                          \
      "--runtime cpu: avx512 | avx2, the vector ISA oneDNN runs on (default\n"                                   \
      "avx512: avx512_core, Xeon since Skylake, AMD since Zen 4; avx2:\n"                                       \
      "older AMD EPYC and desktop CPUs; lscpu's flags tell)")                                                     \
    X(CHECKPOINT, "--checkpoint", "HOW", 0, OPT_BIT(TRAIN),                                                      \
      "activation checkpointing: N (>= 2 segments), sqrt (sqrt of the\n"                                      \
      "chain's layers, the places a single tensor crosses), layers (each\n"                                    \
      "decoder layer of a language model, HF gradient_checkpointing_enable)\n"                                 \
      "or selective (each layer's core attention, Megatron-LM; GPT-2/NeoX);\n"                                 \
      "without it, JSON layers flagged \"checkpoint\" form the segments")                                      \
    /* autograd alone (--grad) saves more for inputs that require grad */                                       \
    X(INPUT_GRAD, "--input-grad", NULL, 0, OPT_BIT(TRAIN) | OPT_BIT(GRAD), "graph inputs require grad")         \
    X(AMP, "--amp", "fp16|bf16", 0, 0, "torch.autocast (fp32 weights, low-precision activations)")             \
    X(DTYPE, "--dtype", "fp16|bf16", 0, 0, "convert weights and inputs (model.half() / .bfloat16())")           \
    /* under --grad a frozen layer's weights want no grad: less is saved */                                     \
    X(FREEZE, "--freeze", "PATTERN", 1, OPT_BIT(TRAIN) | OPT_BIT(GRAD),                                          \
      "freeze layers whose module name matches (glob or prefix)")                                                \
    X(LORA, "--lora", "SPEC", 0, 0,                                                                              \
      "LoRA adapters, r=R,alpha=A,targets=q_proj,v_proj|all-linear[,dropout=P]\n"                               \
      "(PEFT: fp32 adapters on those Linear layers, the rest frozen)")                                         \
    X(GPU, "--gpu", "NAME", 0, 0, "a GPU: fits or not, headroom, roofline time (--list-gpus)")                  \
    X(GPU_MEM, "--gpu-mem", "SIZE", 0, 0,                                                                        \
      "a GPU with SIZE of memory (24GiB, 16GB, 81920MiB); with --gpu,\n"                                         \
      "that GPU's speeds")                                                                                       \
    X(GPU_FILE, "--gpu-file", "FILE", 1, OPT_BIT(GPU) | OPT_BIT(LIST_GPUS), "more GPUs for --gpu (JSON list)")  \
    X(LIST_GPUS, "--list-gpus", NULL, 0, 0, "the GPUs --gpu knows (with --gpu-file's), and exit")                \
    X(DEVICE_PROFILE, "--device-profile", "FILE",                                                                \
      0, 0, "a GPU as memest-measure --calibrate measured it (doc/device-profile.md)")                          \
    X(MAX_BATCH, "--max-batch", NULL, 0, OPT_BIT(GPU) | OPT_BIT(GPU_MEM) | OPT_BIT(DEVICE_PROFILE),             \
      "the largest batch that fits on the GPU")                                                                  \
    X(MAX_SEQ, "--max-seq", NULL, 0, OPT_BIT(GPU) | OPT_BIT(GPU_MEM) | OPT_BIT(DEVICE_PROFILE),                 \
      "language models: the longest prompt that fits on the GPU")                                                \
    X(MAX_CONCURRENCY, "--max-concurrency", "LEN", 0, OPT_BIT(GPU) | OPT_BIT(GPU_MEM) | OPT_BIT(DEVICE_PROFILE),    \
      "language models: the most sequences of LEN tokens vLLM serves at\n"                                      \
      "once on the GPU (paged cache; doc/llm.md)")                                                               \
    X(GPU_MEMORY_UTILIZATION, "--gpu-memory-utilization", "F", 0, OPT_BIT(MAX_CONCURRENCY),                      \
      "vLLM's share of the GPU's memory (default 0.9)")                                                          \
    X(MAX_NUM_BATCHED_TOKENS, "--max-num-batched-tokens", "N", 0, OPT_BIT(MAX_CONCURRENCY),                      \
      "vLLM's profile run's tokens (default max(context, 2048))")                                                \
    X(GPUS, "--gpus", "N", 0, 0,                                                                                 \
      "data parallel on N GPUs; memory per GPU (inference:\n"                                                   \
      "with --shard zero3 only, the one that shards weights)")                                                   \
    X(SHARD, "--shard", "S", 0, OPT_BIT(GPUS), "ddp | zero1 | zero2 | zero3 (fsdp): what the GPUs shard")       \
    X(TP, "--tp", "T", 0, OPT_BIT(TRAIN),                                                                         \
      "language models: Megatron-LM tensor parallelism over T GPUs; the\n"                                      \
      "graph, parameters and memory are one rank's (--gpus: data parallel)")                                     \
    X(SP, "--sp", NULL, 0, OPT_BIT(TP), "with --tp: sequence parallelism (norms, dropouts on seq/T)")             \
    X(PLAN, "--plan", NULL, 0, OPT_BIT(GPU),                                                                       \
      "language models under --train: the plans for --gpus N GPUs of --gpu\n"                                    \
      "(tensor parallel x data parallel x ZeRO x checkpointing), each one\n"                                     \
      "rank's timeline, and the Pareto set of memory vs step time; without\n"                                    \
      "--gpus, on the fewest GPUs for which one fits")                                                            \
    X(PLOT, "--plot", "FILE.svg", 0, 0, "memory timeline")                                                       \
    X(NETRON, "--netron", "FILE", 0, 0, "Netron metrics attachment")                                             \
    X(CHECK, "--check", "GOLDEN", 0, 0, "CI golden check (exit 1 if moved)")                                     \
    X(TOLERANCE, "--tolerance", "PCT", 0, OPT_BIT(CHECK), "how far --check lets a figure move (default 1%)")   \
    X(UPDATE_GOLDEN, "--update-golden", "FILE", 0, 0, "write the golden --check reads")                         \
    X(OUTPUT, "-o", "FILE", 0, 0, "write the report to FILE")                                                    \
    X(VERSION, "--version", NULL, 0, 0, "the version, and exit")                                                 \
    X(HELP, "--help", NULL, 0, 0, "this text, and exit (also -h)")                                             \
    X(PP, "--pp", "P", 0, OPT_BIT(TRAIN),                                                                        \
      "language models: pipeline parallelism over P stages (Megatron-LM's\n"                                   \
      "1F1B, the layers split evenly); memory of the worst stage per GPU")                                     \
    X(MICRO_BATCHES, "--micro-batches", "M", 0, OPT_BIT(PP) | OPT_BIT(PLAN), "micro-batches of --batch each a step (default P)")   \
    X(OFFLOAD, "--offload", "WHAT", 0, OPT_BIT(TRAIN),                                                            \
      "optimizer | params: ZeRO-Offload (DeepSpeed, device cpu): fp32 master\n"                               \
      "weights, optimizer state and gradients on the host (params: the\n"                                     \
      "parameters too, --shard zero3); the host's bytes reported apart")                                    \
    X(EP, "--ep", "E", 0, 0,                                                                                      \
      "language models with experts: expert parallelism over E GPUs, each\n"                                   \
      "holding experts/E of every MoE layer (tokens through an all-to-all)")

/* Options that must not be given together, and why (both are named). */
#define MEMEST_OPTION_CONFLICTS(Y)                                                              \
    Y(TRAIN, GRAD, "a training step runs autograd already")                                    \
    Y(AMP, DTYPE, "autocast keeps fp32 weights, --dtype converts them")                        \
    Y(GPU, DEVICE_PROFILE, "the profile is the GPU, measured") \
    Y(MAX_CONCURRENCY, TRAIN, "vLLM serves inference")                                        \
    Y(PLAN, TP, "the plans choose the tensor parallelism")                                     \
    Y(PLAN, PP, "the plans choose the pipeline parallelism")                                   \
    Y(PLAN, SHARD, "the plans choose the ZeRO stage")                                          \
    Y(PLAN, CHECKPOINT, "the plans choose the checkpointing")                                  \
    Y(PLAN, OFFLOAD, "the plans choose the offload")                                           \
    Y(PLAN, MAX_BATCH, "the plans keep --batch as the micro-batch")                            \
    Y(PLAN, MAX_SEQ, "the plans keep --seq")                                                   \
    Y(PP, MAX_BATCH, "the search runs one model, not every stage")                             \
    Y(PP, MAX_SEQ, "the search runs one model, not every stage")                               \
    Y(PP, FREEZE, "each stage is loaded again: freeze with --lora")

typedef enum MeCliOpt {
#define X(id, name, arg, many, needs, help) OPT_##id,
    MEMEST_OPTIONS(X)
#undef X
    OPT_COUNT
} MeCliOpt;
#define OPT_BIT_OF(o) (UINT64_C(1) << (o))
#define OPT_BIT(id) OPT_BIT_OF(OPT_##id)
_Static_assert(OPT_COUNT <= 64, "a set of options is a uint64_t");

typedef struct MeCliOption {
    const char *name, *arg;
    int many;
    uint64_t needs;
    const char *help;
} MeCliOption;

static const MeCliOption me_cli_options[OPT_COUNT] = {
#define X(id, name, arg, many, needs, help) [OPT_##id] = { name, arg, many, needs, help },
    MEMEST_OPTIONS(X)
#undef X
};

typedef struct MeCliConflict {
    int a, b;
    const char *why;
} MeCliConflict;

static const MeCliConflict me_cli_conflicts[] = {
#define Y(a, b, why) { OPT_##a, OPT_##b, why },
    MEMEST_OPTION_CONFLICTS(Y)
#undef Y
};

#define MEMEST_SYNOPSIS "memest MODEL.onnx|MODEL.json [options]"
#define MEMEST_EXIT_STATUS "0 ok, 1 golden check failed, 2 bad input or usage, 3 unsupported op under --strict"

#endif
