#!/usr/bin/python3
"""PyTorch's side of the predict benchmark (benchmarks/predict.sh): classify the JPEGs of a folder
as torchvision's ImageNet evaluation does (shorter side to 256 bilinear, centre crop 224, ImageNet
mean and std) in batches under torch.no_grad(), writing the top-5 classes per file as CSV. The
models are torchvision's ResNet-50 and timm's ViT-B/16 in plain torch.nn (Debian's python3-torch
1.13 has no torchvision), their parameters named as those libraries name them, so --export writes
the weights ramtrain's predict reads (--model resnet50 / vit_base_patch16_224 --weights FILE).

Usage: /usr/bin/python3 predict_torch.py --model resnet50|vit_b_16 (--export FILE | --images DIR
       [--weights FILE] [--batch 64] [--threads 2] [--out CSV])
"""
import argparse
import os
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from PIL import Image


class Bottleneck(nn.Module):
    def __init__(self, cin, width, stride):
        super().__init__()
        cout = width * 4
        self.conv1 = nn.Conv2d(cin, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, cout, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(
                nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        out += identity
        return self.relu(out)


class ResNet50(nn.Module):
    """torchvision's resnet50 (v1.5: the stride on the 3x3), its state dict keys."""

    def __init__(self, classes=1000):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        cin = 64
        for i, (width, blocks, stride) in enumerate([(64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)]):
            stage = []
            for b in range(blocks):
                stage.append(Bottleneck(cin, width, stride if b == 0 else 1))
                cin = width * 4
            setattr(self, f"layer{i + 1}", nn.Sequential(*stage))
        self.fc = nn.Linear(2048, classes)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


class Mlp(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.fc2 = nn.Linear(hidden, dim)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x)))


class Attention(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        b, n, c = x.shape
        qkv = self.qkv(x).reshape(b, n, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)
        attn = (q @ k.transpose(-2, -1)) * (c // self.heads) ** -0.5
        x = attn.softmax(dim=-1) @ v
        return self.proj(x.transpose(1, 2).reshape(b, n, c))


class Block(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, eps=1e-6)
        self.attn = Attention(dim, heads)
        self.norm2 = nn.LayerNorm(dim, eps=1e-6)
        self.mlp = Mlp(dim, 4 * dim)

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class ViTB16(nn.Module):
    """timm's vit_base_patch16_224, its state dict keys."""

    def __init__(self, classes=1000, dim=768):
        super().__init__()
        self.patch_embed = nn.Module()
        self.patch_embed.proj = nn.Conv2d(3, dim, 16, 16)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos_embed = nn.Parameter(torch.randn(1, 197, dim) * 0.02)
        self.blocks = nn.Sequential(*[Block(dim, 12) for _ in range(12)])
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.head = nn.Linear(dim, classes)

    def forward(self, x):
        x = self.patch_embed.proj(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], 1) + self.pos_embed
        return self.head(self.norm(self.blocks(x))[:, 0])


MEAN = torch.tensor([0.485, 0.456, 0.406]).view(3, 1, 1)
STD = torch.tensor([0.229, 0.224, 0.225]).view(3, 1, 1)


def load(path):
    """torchvision's Resize(256) + CenterCrop(224) + ToTensor + Normalize, with Pillow."""
    img = Image.open(path).convert("RGB")
    w, h = img.size
    scale = 256 / min(w, h)
    img = img.resize((max(256, round(w * scale)), max(256, round(h * scale))), Image.BILINEAR)
    w, h = img.size
    left, top = (w - 224) // 2, (h - 224) // 2
    img = img.crop((left, top, left + 224, top + 224))
    t = torch.frombuffer(bytearray(img.tobytes()), dtype=torch.uint8).view(224, 224, 3)
    return (t.permute(2, 0, 1).float() / 255 - MEAN) / STD


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", required=True, choices=["resnet50", "vit_b_16"])
    p.add_argument("--export")
    p.add_argument("--weights", help="a state dict to load, as a user serving weights does")
    p.add_argument("--images")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--out", default=os.devnull)
    a = p.parse_args()
    torch.manual_seed(0)
    model = {"resnet50": ResNet50, "vit_b_16": ViTB16}[a.model]()
    if a.export:
        torch.save(model.state_dict(), a.export)
        return
    if a.weights:
        model.load_state_dict(torch.load(a.weights))
    torch.set_num_threads(a.threads)
    model.eval()
    files = sorted(
        os.path.join(d, f) for d, _, fs in os.walk(a.images) for f in fs if f.endswith(".jpg"))
    start = time.perf_counter()
    with torch.no_grad(), open(a.out, "w") as out:
        for i in range(0, len(files), a.batch):
            chunk = files[i:i + a.batch]
            probs = model(torch.stack([load(f) for f in chunk])).softmax(-1)
            top = probs.topk(5, -1)
            for f, ps, cs in zip(chunk, top.values.tolist(), top.indices.tolist()):
                out.write(f + "," + ",".join(f"{c},{p:.6f}" for c, p in zip(cs, ps)) + "\n")
    took = time.perf_counter() - start
    print(f"pytorch {torch.__version__} {a.model} no_grad: {len(files)} images, batch {a.batch},"
          f" threads {a.threads}: {took:.2f} s in the loop, {len(files) / took:.2f} images/s")


if __name__ == "__main__":
    main()
