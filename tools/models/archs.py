"""Real architectures at small sizes, built with the onnx package only (no torch).

Each builder returns (onnx.ModelProto, feeds_fn) where feeds_fn(rng, batch) makes valid random
inputs (token ids below the vocabulary size, masks with padding, images ~N(0,1)).
Topologies follow the papers/reference code; widths are scaled down so CI's CPU runs them fast.
"""
import numpy as np
from onnx import TensorProto

from builder import Builder

# ----------------------------------------------------------------------------------------------
# CNNs


def _basic_block(b, x, cin, cout, stride):
    y = b.relu(b.bn(b.conv(x, cin, cout, 3, stride), cout))
    y = b.bn(b.conv(y, cout, cout, 3), cout, gamma=0.3)  # small last gamma keeps activations O(1)
    sc = x if stride == 1 and cin == cout else b.bn(b.conv(x, cin, cout, 1, stride), cout)
    return b.relu(b.op("Add", [y, sc]))


def _bottleneck(b, x, cin, mid, stride):
    cout = mid * 4
    y = b.relu(b.bn(b.conv(x, cin, mid, 1), mid))
    y = b.relu(b.bn(b.conv(y, mid, mid, 3, stride), mid))  # torchvision v1.5: stride on the 3x3
    y = b.bn(b.conv(y, mid, cout, 1), cout, gamma=0.3)
    sc = x if stride == 1 and cin == cout else b.bn(b.conv(x, cin, cout, 1, stride), cout)
    return b.relu(b.op("Add", [y, sc]))


def resnet(depth=18, width=16, size=64, classes=100, name=None):
    """ResNet-18/34 (basic blocks) or -50/101 (bottlenecks); width 64 is the paper's."""
    layers = {18: [2, 2, 2, 2], 34: [3, 4, 6, 3], 50: [3, 4, 6, 3], 101: [3, 4, 23, 3]}[depth]
    bottleneck = depth >= 50
    b = Builder(name or f"resnet{depth}")
    x = b.input("input", ["batch", 3, size, size])
    y = b.relu(b.bn(b.conv(x, 3, width, 7, 2), width))
    y = b.op("MaxPool", [y], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    cin = width
    for stage, n in enumerate(layers):
        mid = width * (2 ** stage)
        for i in range(n):
            stride = 2 if stage > 0 and i == 0 else 1
            if bottleneck:
                y = _bottleneck(b, y, cin, mid, stride)
                cin = mid * 4
            else:
                y = _basic_block(b, y, cin, mid, stride)
                cin = mid
    y = b.op("Flatten", [b.op("GlobalAveragePool", [y])], axis=1)
    w = b.weight([classes, cin], fan_in=cin, gain=1.0)
    bias = b.const(np.zeros(classes, np.float32), "fc_b")
    b.output(b.op("Gemm", [y, w, bias], transB=1), "logits")
    return b.model(), lambda rng, batch: {"input": rng.standard_normal((batch, 3, size, size)).astype(np.float32)}


def _relu6(b, x):
    return b.op("Clip", [x, b.f32(0.0), b.f32(6.0)])


def mobilenet_v2(width_mult=0.5, size=64, classes=100):
    b = Builder("mobilenetv2")
    def ch(c):
        return max(8, int(c * width_mult + 4) // 8 * 8)
    x = b.input("input", ["batch", 3, size, size])
    cin = ch(32)
    y = _relu6(b, b.bn(b.conv(x, 3, cin, 3, 2), cin))
    for t, c, n, s in [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2),
                       (6, 320, 1, 1)]:
        cout = ch(c)
        for i in range(n):
            stride = s if i == 0 else 1
            hidden = cin * t
            z = y
            if t != 1:
                z = _relu6(b, b.bn(b.conv(z, cin, hidden, 1), hidden))
            z = _relu6(b, b.bn(b.conv(z, hidden, hidden, 3, stride, group=hidden), hidden))  # depthwise
            z = b.bn(b.conv(z, hidden, cout, 1), cout, gamma=0.5)
            y = b.op("Add", [y, z]) if stride == 1 and cin == cout else z
            cin = cout
    last = ch(1280)
    y = _relu6(b, b.bn(b.conv(y, cin, last, 1), last))
    y = b.op("Flatten", [b.op("GlobalAveragePool", [y])], axis=1)
    w = b.weight([classes, last], fan_in=last, gain=1.0)
    b.output(b.op("Gemm", [y, w, b.const(np.zeros(classes, np.float32), "fc_b")], transB=1), "logits")
    return b.model(), lambda rng, batch: {"input": rng.standard_normal((batch, 3, size, size)).astype(np.float32)}


def resnet_small():
    """The README's demo model: a ResNet-style network (basic blocks, 4 stages) at 64x64."""
    return resnet(18, width=16, size=64, classes=10, name="resnet_small")

# ----------------------------------------------------------------------------------------------
# Transformers


def _attention(b, x, d, heads, mask_add=None, dyn_reshape=False):
    """Multi-head self-attention on x [B, S, d]; mask_add broadcasts onto [B, h, S, S]."""
    hd = d // heads
    if dyn_reshape:  # as torch.onnx exports view(B, S, h, hd): Shape -> Gather -> Unsqueeze -> Concat
        shp = b.op("Shape", [x])
        bdim = b.op("Unsqueeze", [b.op("Gather", [shp, b.i64(0)], axis=0), b.i64([0])])
        sdim = b.op("Unsqueeze", [b.op("Gather", [shp, b.i64(1)], axis=0), b.i64([0])])
        split_shape = b.op("Concat", [bdim, sdim, b.i64([heads]), b.i64([hd])], axis=0)
        merge_shape = b.op("Concat", [bdim, sdim, b.i64([d])], axis=0)
    else:
        split_shape, merge_shape = b.i64([0, 0, heads, hd]), b.i64([0, 0, d])

    def heads_of(t, perm):
        return b.op("Transpose", [b.op("Reshape", [t, split_shape])], perm=perm)

    q = heads_of(b.linear(x, d, d), [0, 2, 1, 3])
    k = heads_of(b.linear(x, d, d), [0, 2, 3, 1])
    v = heads_of(b.linear(x, d, d), [0, 2, 1, 3])
    s = b.op("Div", [b.op("MatMul", [q, k]), b.f32(np.sqrt(hd))])
    if mask_add is not None:
        s = b.op("Add", [s, mask_add])
    p = b.op("Softmax", [s], axis=-1)
    ctx = b.op("Transpose", [b.op("MatMul", [p, v])], perm=[0, 2, 1, 3])
    return b.linear(b.op("Reshape", [ctx, merge_shape]), d, d)


def vit_tiny(size=64, patch=8, d=192, heads=3, depth=12, classes=100):
    """ViT-Ti/8 (dim 192, 3 heads, 12 blocks, MLP 768) on 64x64 images: 64 patches + [CLS]."""
    b = Builder("vit_tiny")
    x = b.input("pixel_values", ["batch", 3, size, size])
    n = (size // patch) ** 2
    w = b.weight([d, 3, patch, patch], fan_in=3 * patch * patch, gain=1.0)
    emb = b.op("Conv", [x, w, b.const(np.zeros(d, np.float32), "b")], kernel_shape=[patch, patch], strides=[patch, patch])
    tokens = b.op("Transpose", [b.op("Reshape", [emb, b.i64([0, d, -1])])], perm=[0, 2, 1])
    batch = b.op("Unsqueeze", [b.op("Gather", [b.op("Shape", [x]), b.i64(0)], axis=0), b.i64([0])])
    cls = b.op("Expand", [b.const((0.02 * b.rng.standard_normal((1, 1, d))).astype(np.float32), "cls"),
                          b.op("Concat", [batch, b.i64([1, d])], axis=0)])
    h = b.op("Add", [b.op("Concat", [cls, tokens], axis=1),
                     b.const((0.02 * b.rng.standard_normal((1, n + 1, d))).astype(np.float32), "pos")])
    for _ in range(depth):
        h = b.op("Add", [h, _attention(b, b.layer_norm(h, d), d, heads)])
        m = b.linear(b.gelu_erf(b.linear(b.layer_norm(h, d), d, 4 * d)), 4 * d, d)
        h = b.op("Add", [h, m])
    h = b.layer_norm(h, d)
    cls_out = b.op("Gather", [h, b.i64(0)], axis=1)
    b.output(b.linear(cls_out, d, classes), "logits")
    return b.model(), lambda rng, batch: {"pixel_values": rng.standard_normal((batch, 3, size, size)).astype(np.float32)}


def _token_feeds(vocab, seq, with_mask):
    def feeds(rng, batch):
        f = {"input_ids": rng.integers(0, vocab, (batch, seq), dtype=np.int64)}
        if with_mask:
            mask = np.ones((batch, seq), np.int64)
            for i in range(batch):
                mask[i, seq - (i % max(1, seq // 2)):] = 0  # rows padded by different amounts
            f["attention_mask"] = mask
        return f
    return feeds


def bert(layers=2, d=64, heads=4, ffn=128, vocab=100, max_pos=64, seq=16):
    """BERT encoder with the ops a HuggingFace torch.onnx (opset 17) export uses."""
    b = Builder("bert")
    ids = b.input("input_ids", ["batch", "sequence"], TensorProto.INT64)
    mask = b.input("attention_mask", ["batch", "sequence"], TensorProto.INT64)
    shp = b.op("Shape", [ids])
    seq_len = b.op("Gather", [shp, b.i64(1)], axis=0)
    pos_ids = b.op("Unsqueeze", [b.op("Range", [b.i64(0), seq_len, b.i64(1)]), b.i64([0])])
    type_ids = b.op("ConstantOfShape", [shp], value=_i64_tensor(0))
    def table(rows):
        return b.const((0.5 * b.rng.standard_normal((rows, d))).astype(np.float32), "emb")
    e = b.op("Add", [b.op("Gather", [table(vocab), ids], axis=0), b.op("Gather", [table(max_pos), pos_ids], axis=0)])
    e = b.op("Add", [e, b.op("Gather", [table(2), type_ids], axis=0)])
    h = b.layer_norm(e, d)
    # Extended mask: [B,1,1,S] -> Where(mask == 0, finfo.min, 0) -> Expand to [B,1,S,S].
    m4 = b.op("Unsqueeze", [mask, b.i64([1, 2])])
    neg = b.op("Where", [b.op("Equal", [m4, b.i64(0)]), b.f32(np.finfo(np.float32).min), b.f32(0.0)])
    bdim = b.op("Unsqueeze", [b.op("Gather", [shp, b.i64(0)], axis=0), b.i64([0])])
    sdim = b.op("Unsqueeze", [seq_len, b.i64([0])])
    mask_add = b.op("Expand", [neg, b.op("Concat", [bdim, b.i64([1]), sdim, sdim], axis=0)])
    for _ in range(layers):
        h = b.layer_norm(b.op("Add", [h, _attention(b, h, d, heads, mask_add, dyn_reshape=True)]), d)
        f = b.linear(b.gelu_erf(b.linear(h, d, ffn)), ffn, d)
        h = b.layer_norm(b.op("Add", [h, f]), d)
    b.output(h, "last_hidden_state")
    pooled = b.op("Tanh", [b.linear(b.op("Gather", [h, b.i64(0)], axis=1), d, d)])
    b.output(pooled, "pooler_output")
    return b.model(), _token_feeds(vocab, seq, True)


def gpt_block(d=64, heads=4, vocab=100, max_pos=64, seq=16):
    """GPT-2 style: token + position embeddings, one pre-LN decoder block with a causal mask
    (Trilu), tanh-GELU MLP, final LN, LM head tied to the token embedding."""
    b = Builder("gpt_block")
    ids = b.input("input_ids", ["batch", "sequence"], TensorProto.INT64)
    shp = b.op("Shape", [ids])
    seq_len = b.op("Gather", [shp, b.i64(1)], axis=0)
    wte_np = (0.1 * b.rng.standard_normal((vocab, d))).astype(np.float32)
    wte = b.const(wte_np, "wte")
    pos = b.op("Range", [b.i64(0), seq_len, b.i64(1)])
    h = b.op("Add", [b.op("Gather", [wte, ids], axis=0),
                     b.op("Gather", [b.const((0.1 * b.rng.standard_normal((max_pos, d))).astype(np.float32), "wpe"), pos],
                          axis=0)])
    sdim = b.op("Unsqueeze", [seq_len, b.i64([0])])
    ones = b.op("ConstantOfShape", [b.op("Concat", [sdim, sdim], axis=0)], value=_f32_tensor(1.0))
    lower = b.op("Trilu", [ones], upper=0)
    causal = b.op("Where", [b.op("Equal", [lower, b.f32(0.0)]), b.f32(np.finfo(np.float32).min), b.f32(0.0)])
    h = b.op("Add", [h, _attention(b, b.layer_norm(h, d), d, heads, causal)])
    h = b.op("Add", [h, b.linear(b.gelu_tanh(b.linear(b.layer_norm(h, d), d, 4 * d)), 4 * d, d)])
    h = b.layer_norm(h, d)
    logits = b.op("MatMul", [h, b.op("Transpose", [wte], perm=[1, 0])])
    b.output(logits, "logits")
    return b.model(), _token_feeds(vocab, seq, False)


def _i64_tensor(v):
    from onnx import helper
    return helper.make_tensor("value", TensorProto.INT64, [1], [v])


def _f32_tensor(v):
    from onnx import helper
    return helper.make_tensor("value", TensorProto.FLOAT, [1], [v])


ARCHS = {
    "resnet18": lambda: resnet(18),
    "resnet50": lambda: resnet(50),
    "mobilenetv2": mobilenet_v2,
    "vit_tiny": vit_tiny,
    "bert": bert,
    "gpt_block": gpt_block,
    "resnet_small": resnet_small,
    # Full-size models for the GPU benchmarks (not built by the CPU tests: hundreds of MB).
    "resnet50_full": lambda: resnet(50, width=64, size=224, classes=1000, name="resnet50_full"),
    "bert_base": lambda: bert(layers=12, d=768, heads=12, ffn=3072, vocab=30522, max_pos=512, seq=128),
}
