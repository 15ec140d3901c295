"""python3 -m memest CONSTRUCTOR [options]: a module from a constructor path
('torchvision.models.resnet50', or 'package.module:attr'; called without
arguments unless it already is a module), exported and analyzed with the
memest command's options."""
import argparse
import importlib
import os
import sys

import memest


def resolve(path):
    """'a.b.c' (import a.b, take c) or 'a.b:c.d'; called when not a module."""
    if ":" in path:
        mod, _, attr = path.partition(":")
    else:
        mod, _, attr = path.rpartition(".")
    if not mod or not attr:
        raise ValueError("%r: expected a dotted path such as torchvision.models.resnet50 or module:attr" % path)
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())
    obj = importlib.import_module(mod)
    for part in attr.split("."):
        obj = getattr(obj, part)
    import torch
    return obj if isinstance(obj, torch.nn.Module) else obj()


def parser():
    p = argparse.ArgumentParser(prog="python3 -m memest", description=__doc__.splitlines()[0],
                                epilog="exit status: 0 ok, 1 golden check moved, 2 bad input, usage or export "
                                       "failure, 3 unknown op under --strict")
    p.add_argument("constructor", nargs="?", help="torchvision.models.resnet50 or module:attr")
    p.add_argument("--input", action="append", default=[], metavar="[NAME=]SHAPE[:DTYPE]",
                   help="one sample's shape, e.g. 3x224x224 or input_ids=128:int64 (repeat for several inputs)")
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--convention", default="default")
    p.add_argument("--format", default="table", choices=["table", "json", "csv", "markdown"])
    p.add_argument("--strict", action="store_true")
    p.add_argument("--train", action="store_true")
    p.add_argument("--grad", action="store_true")
    p.add_argument("--optimizer")
    p.add_argument("--loss")
    p.add_argument("--runtime", default="cuda", choices=["cuda", "cpu"])
    p.add_argument("--checkpoint")
    p.add_argument("--input-grad", action="store_true")
    p.add_argument("--amp", choices=["fp16", "bf16"])
    p.add_argument("--dtype", choices=["fp16", "bf16"])
    p.add_argument("--freeze", action="append", default=[])
    p.add_argument("--gpu")
    p.add_argument("--gpu-mem", metavar="SIZE")
    p.add_argument("--max-batch", action="store_true")
    p.add_argument("--gpus", type=int, default=1)
    p.add_argument("--shard", choices=["ddp", "zero1", "zero2", "zero3", "fsdp"])
    p.add_argument("--plot", metavar="FILE")
    p.add_argument("--netron", metavar="FILE")
    p.add_argument("--check", metavar="GOLDEN")
    p.add_argument("--tolerance", type=float, default=1.0)
    p.add_argument("--update-golden", metavar="FILE")
    p.add_argument("--opset", type=int, help="ONNX opset of the export (default: the newest torch writes)")
    p.add_argument("--save-onnx", metavar="FILE", help="also write the exported ONNX file")
    p.add_argument("-o", dest="output", metavar="FILE")
    p.add_argument("--list-gpus", action="store_true")
    p.add_argument("--version", action="store_true")
    return p


def main(argv=None):
    a = parser().parse_args(argv)
    if a.version:
        print("memest %s (python package, library %s)" % (memest.version(), memest.library_path()))
        return 0
    if a.list_gpus:
        for g in memest.gpus():
            print("%-12s %8.2f GiB" % (g.name, g.memory / 2**30))
        return 0
    if not a.constructor:
        parser().print_usage(sys.stderr)
        return 2
    try:
        gpu = a.gpu_mem if a.gpu_mem else a.gpu
        if a.gpu_mem and a.gpu:  # a card of that size with the named one's speeds
            g, size = memest.gpu(a.gpu), memest.gpu(a.gpu_mem).memory
            gpu = memest.Gpu(g.name, size, g.bandwidth, g.fp32_flops, g.fp16_flops, g.sms)
        if a.max_batch and not gpu:
            raise ValueError("--max-batch needs --gpu NAME or --gpu-mem SIZE")
        ckpt = a.checkpoint
        if ckpt is not None and ckpt != "sqrt":
            ckpt = int(ckpt) if ckpt.isdigit() else ckpt
        module = resolve(a.constructor)
        mode = "train" if a.train else "grad" if a.grad else "infer"
        r = memest.estimate(module, input_size=a.input or None, batch=a.batch, mode=mode, optimizer=a.optimizer,
                            amp=a.amp, loss=a.loss, checkpoint=ckpt, freeze=a.freeze, runtime=a.runtime, gpu=gpu,
                            convention=a.convention, input_grad=a.input_grad, dtype=a.dtype, gpus=a.gpus,
                            shard=a.shard, strict=a.strict, opset=a.opset)
        if a.save_onnx:
            r.exported.save(a.save_onnx)
        if a.max_batch:
            r.max_batch()
        text = r.render(a.format)
        if a.output:
            with open(a.output, "w") as f:
                f.write(text)
        else:
            sys.stdout.write(text)
        if a.plot and a.plot.endswith(".svg"):  # the library's plot, as the memest command writes it
            with open(a.plot, "w") as f:
                f.write(r.svg())
        elif a.plot:
            r.plot(a.plot)
        if a.netron:
            r.netron(a.netron)
        if a.update_golden:
            r.write_golden(a.update_golden)
        if a.check:
            res = r.check(a.check, a.tolerance)
            print(res, file=sys.stderr)
            return 0 if res else 1
    except memest.MemestError as e:
        print("memest: %s" % e, file=sys.stderr)
        return 3 if e.name == "MEMEST_ERR_UNSUPPORTED" else 2
    except (memest.ExportError, ValueError, TypeError, ImportError, AttributeError, OSError) as e:
        print("memest: %s" % e, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
