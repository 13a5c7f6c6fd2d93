#!/usr/bin/env python3
"""Exports small versions of compare.py's transformers (BERT, GPT-2, torchvision ViT: 2 layers,
hidden 64), a Swin and a Whisper-style encoder, and CNNs (ConvNeXt, EfficientNet, MobileNetV3 blocks at 32x32: a few channels each)
with the same exporter settings, so the graphs the exporters write can be studied on a
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
from torchvision.models.convnext import ConvNeXt, CNBlockConfig
from torchvision.models.efficientnet import EfficientNet, MBConvConfig
from torchvision.models.mobilenetv3 import MobileNetV3, InvertedResidualConfig
convnext = ConvNeXt([CNBlockConfig(16, 32, 1), CNBlockConfig(32, None, 1)], num_classes=10)
effnet = EfficientNet([MBConvConfig(1, 3, 1, 16, 8, 1), MBConvConfig(6, 3, 2, 8, 16, 1), MBConvConfig(6, 5, 2, 16, 24, 1)],
                      dropout=0.2, num_classes=10, last_channel=64)
mnv3 = MobileNetV3([InvertedResidualConfig(16, 3, 16, 16, True, "RE", 2, 1, 1.0),
                    InvertedResidualConfig(16, 3, 48, 24, False, "RE", 2, 1, 1.0),
                    InvertedResidualConfig(24, 5, 64, 24, True, "HS", 1, 1, 1.0)], last_channel=64, num_classes=10)
for m in (effnet, mnv3):  # as compare.py: depthwise weights by fan_in, so activations keep their scale
    for c in m.modules():
        if isinstance(c, torch.nn.Conv2d) and c.groups > 1 and c.groups == c.in_channels:
            torch.nn.init.kaiming_normal_(c.weight, mode="fan_in", nonlinearity="relu")
img = {"input": torch.randn(2, 3, 32, 32)}
# Swin: 56x56 images, patch 4 -> 14x14 tokens in 7x7 windows, the second block of each stage
# shifted by 3 (torchvision's Roll/Pad/mask form); the second stage is one window (no shift).
from torchvision.models.swin_transformer import SwinTransformer
swin = SwinTransformer(patch_size=[4, 4], embed_dim=32, depths=[2, 2], num_heads=[2, 4], window_size=[7, 7],
                       num_classes=10)
# Whisper-style audio encoder: Conv1d(k3) -> GELU -> Conv1d(k3, stride 2) -> 2 transformer layers.
whisper = tf.WhisperModel(tf.WhisperConfig(d_model=64, encoder_layers=2, encoder_attention_heads=4, encoder_ffn_dim=128,
                                           decoder_layers=1, decoder_attention_heads=4, num_mel_bins=16,
                                           max_source_positions=32)).encoder
models = {
    "swin_tiny_tv": (swin, {"input": torch.randn(2, 3, 56, 56)}),
    "whisper_tiny_encoder": (whisper, {"input_features": torch.randn(2, 16, 64)}),
    "convnext_tiny_tv": (convnext, img),
    "efficientnet_tiny_tv": (effnet, img),
    "mobilenet_v3_tiny_tv": (mnv3, img),
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
