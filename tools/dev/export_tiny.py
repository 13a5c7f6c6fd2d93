#!/usr/bin/env python3
"""Exports small versions of compare.py's transformers (BERT, GPT-2, torchvision ViT: 2 layers,
hidden 64) with the same exporter settings, so the graphs the exporters write can be studied on a
machine without torch: `python3 tools/dev/export_tiny.py OUT_DIR` on a machine with torch,
transformers and torchvision (the H200 machine)."""
import os, sys
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "scripts", "gpu"))
import torch
import compare  # noqa: E402  (scripts/gpu/compare.py: Wrapped, export)

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
import transformers as tf
import torchvision
seq = 16
torch.manual_seed(0)
bert = tf.BertModel(tf.BertConfig(vocab_size=256, max_position_embeddings=32, hidden_size=64, num_hidden_layers=2,
                                  num_attention_heads=4, intermediate_size=128))
mask = torch.ones(2, seq, dtype=torch.int64)
mask[:, -3:] = 0
vit = torchvision.models.VisionTransformer(image_size=32, patch_size=16, num_layers=2, num_heads=4, hidden_dim=64,
                                          mlp_dim=128, num_classes=10)
torch.nn.init.normal_(vit.heads.head.weight, std=0.02)  # torchvision zeroes the head
models = {
    "bert_tiny": (bert, {"input_ids": torch.randint(0, 256, (2, seq)), "attention_mask": mask}),
    "gpt2_tiny": (tf.GPT2Model(tf.GPT2Config(vocab_size=256, n_positions=32, n_embd=64, n_layer=2, n_head=4)),
                  {"input_ids": torch.randint(0, 256, (2, seq))}),
    "vit_tiny_tv": (vit, {"input": torch.randn(2, 3, 32, 32)}),
}
for name, (m, sample) in models.items():
    m.eval()
    for exporter in ("legacy", "dynamo"):
        p = os.path.join(out, f"{name}_{exporter}.onnx")
        try:
            compare.export(m, sample, p, exporter)
            print("wrote", p, os.path.getsize(p))
        except Exception as e:  # noqa: BLE001
            print("FAILED", name, exporter, e)
