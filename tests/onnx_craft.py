"""Writes small ONNX files byte by byte (protobuf wire format, stdlib only),
so tests can craft valid and malformed models without the onnx package.

Field numbers follow onnx.proto: ModelProto{1 ir_version, 7 graph,
8 opset_import}, GraphProto{1 node, 2 name, 5 initializer, 11 input,
12 output}, NodeProto{1 input, 2 output, 3 name, 4 op_type, 5 attribute},
TensorProto{1 dims, 2 data_type, 8 name, 9 raw_data},
ValueInfoProto{1 name, 2 type}, TypeProto{1 tensor_type},
TypeProto.Tensor{1 elem_type, 2 shape}, TensorShapeProto{1 dim},
Dimension{1 dim_value, 2 dim_param}, AttributeProto{1 name, 2 f, 3 i, 4 s, 5 t, 8 ints,
20 type}, OperatorSetIdProto{1 domain, 2 version}.
"""
import struct

FLOAT, INT64 = 1, 7


def varint(n):
    n &= (1 << 64) - 1  # negative numbers as two's complement, like protobuf
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def key(field, wt):
    return varint((field << 3) | wt)


def f_varint(field, n):
    return key(field, 0) + varint(n)


def f_bytes(field, data, claimed_len=None):
    if isinstance(data, str):
        data = data.encode()
    n = len(data) if claimed_len is None else claimed_len
    return key(field, 2) + varint(n) + data


def dim(v):
    return f_bytes(1, f_varint(1, v) if isinstance(v, int) else f_bytes(2, v))


def value_info(name, shape, elem=FLOAT):
    shp = b"".join(dim(d) for d in shape)
    tensor_type = f_varint(1, elem) + f_bytes(2, shp)
    return f_bytes(1, name) + f_bytes(2, f_bytes(1, tensor_type))


def tensor(name, dims, dtype=FLOAT, raw=None, external=False):
    t = b"".join(f_varint(1, d) for d in dims) + f_varint(2, dtype) + f_bytes(8, name)
    if external:
        t += f_bytes(13, f_bytes(1, "location") + f_bytes(2, "missing.data")) + f_varint(14, 1)
    elif raw is not None:
        t += f_bytes(9, raw)
    return t


def int64_raw(values):
    return b"".join(struct.pack("<q", v) for v in values)


def attr_int(name, v):
    return f_bytes(1, name) + f_varint(3, v) + f_varint(20, 2)


def attr_ints(name, vs):
    return f_bytes(1, name) + b"".join(f_varint(8, v) for v in vs) + f_varint(20, 7)


def attr_float(name, v):
    return f_bytes(1, name) + key(2, 5) + struct.pack("<f", v) + f_varint(20, 1)


def attr_str(name, v):
    return f_bytes(1, name) + f_bytes(4, v) + f_varint(20, 3)


def attr_tensor(name, t):
    return f_bytes(1, name) + f_bytes(5, t) + f_varint(20, 4)


def node(op, inputs, outputs, name="", attrs=()):
    n = b"".join(f_bytes(1, i) for i in inputs) + b"".join(f_bytes(2, o) for o in outputs)
    n += f_bytes(3, name if name else op) + f_bytes(4, op)
    return n + b"".join(f_bytes(5, a) for a in attrs)


def graph(nodes, inputs, outputs, initializers=()):
    g = b"".join(f_bytes(1, n) for n in nodes) + f_bytes(2, "g")
    g += b"".join(f_bytes(5, t) for t in initializers)
    g += b"".join(f_bytes(11, i) for i in inputs) + b"".join(f_bytes(12, o) for o in outputs)
    return g


def model(g, opset=17):
    return f_varint(1, 8) + f_bytes(8, f_bytes(1, "") + f_varint(2, opset)) + f_bytes(7, g)


def conv_model(opset=17, weight_dims=(8, 3, 3, 3), external=True, op="Conv", extra_nodes=(), x_shape=("batch", 3, 32, 32)):
    """x -> op(x, w) -> y: a one-conv model whose weight data is elsewhere."""
    w = tensor("w", list(weight_dims), external=external)
    nodes = [node(op, ["x", "w"], ["y"], name="conv")] + list(extra_nodes)
    out = nodes and "y"
    return model(graph(nodes, [value_info("x", list(x_shape))], [value_info(out, [])], [w]), opset)
