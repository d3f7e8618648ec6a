#!/usr/bin/python3
"""PyTorch goldens for ramtrain's model tests (llm.c's test_gpt2 pattern).

Builds tiny configurations of the architectures ramtrain implements, written as timm writes them
(the same module names, so the same state-dict keys), and records what PyTorch computes: the
weights, an input batch, the logits, the mean cross-entropy loss, every parameter's gradient after
one backward, and the losses of three AdamW steps. Computed in float64 (see record). Run with Debian's python3-torch (1.13, which has
no safetensors module: the files are written by hand, as the format's spec lays them out):

    /usr/bin/python3 trainer/src/test/goldens/make_goldens.py trainer/src/test/resources/goldens

The Java tests (nn.PyTorchGoldenTest) compare against these files on every backend.
"""
import collections
import copy
import io
import json
import struct
import sys
from collections import OrderedDict
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F


class Attention(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.scale = (dim // heads) ** -0.5
        self.qkv = nn.Linear(dim, dim * 3)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        b, n, c = x.shape
        qkv = self.qkv(x).reshape(b, n, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)
        attn = (q @ k.transpose(-2, -1)) * self.scale
        attn = attn.softmax(dim=-1)
        return self.proj((attn @ v).transpose(1, 2).reshape(b, n, c))


class Mlp(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(hidden, dim)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


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


class PatchEmbed(nn.Module):
    def __init__(self, patch, channels, dim):
        super().__init__()
        self.proj = nn.Conv2d(channels, dim, patch, stride=patch)


class VisionTransformer(nn.Module):
    """timm's VisionTransformer with class token, global_pool='token', no dropout."""

    def __init__(self, image, patch, channels, dim, depth, heads, classes):
        super().__init__()
        tokens = (image // patch) ** 2 + 1
        self.cls_token = nn.Parameter(torch.randn(1, 1, dim) * 0.02)
        self.pos_embed = nn.Parameter(torch.randn(1, tokens, dim) * 0.02)
        self.patch_embed = PatchEmbed(patch, channels, dim)
        self.blocks = nn.ModuleList([Block(dim, heads) for _ in range(depth)])
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.head = nn.Linear(dim, classes)

    def forward(self, x):
        x = self.patch_embed.proj(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1) + self.pos_embed
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x)[:, 0])


def vit_tiny_golden():
    torch.manual_seed(26)
    model = VisionTransformer(image=16, patch=4, channels=3, dim=32, depth=2, heads=4, classes=5)
    with torch.no_grad():  # norms away from 1/0 and larger weights: attention far from uniform
        for name, p in model.named_parameters():
            if "norm" in name:
                p.copy_((1.0 if name.endswith("weight") else 0.0) + 0.2 * torch.randn_like(p))
            elif name.endswith("weight") and p.dim() == 2:
                p.mul_(3.0)
    x = torch.randn(3, 3, 16, 16)
    labels = torch.tensor([1, 4, 0])
    spec = "vit:4-32-2-4-5"
    return spec, model, x, labels


def record(spec, model, x, labels, lr=1e-3):
    """Everything in float64: the reference is then exact to far below ramtrain's float32 error,
    so a tolerance bounds ramtrain's error alone (a float32 PyTorch's own sums, e.g. a batch norm
    bias gradient cancelling over 16k terms, can be 1e-3 off). Stored as float32."""
    model = model.double()
    x = x.double()
    out = OrderedDict()
    for name, p in model.named_parameters():
        out["param/" + name] = p.detach().clone()
    logits = model(x)
    loss = F.cross_entropy(logits, labels)
    loss.backward()
    out["input"] = x
    out["labels"] = labels.float()
    out["logits"] = logits.detach()
    out["loss"] = loss.detach().reshape(1)
    for name, p in model.named_parameters():
        out["grad/" + name] = p.grad.detach().clone()
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.05)
    losses = []
    for _ in range(3):
        optimizer.zero_grad()
        step_loss = F.cross_entropy(model(x), labels)
        losses.append(step_loss.item())
        step_loss.backward()
        optimizer.step()
    out["adamw_losses"] = torch.tensor(losses)
    out["adamw_lr"] = torch.tensor([lr])
    return out, {"spec": spec, "torch": torch.__version__, "adamw": "lr=%g weight_decay=0.05" % lr}


def write_safetensors(path, tensors, metadata):
    header = {"__metadata__": metadata}
    blobs = []
    offset = 0
    for name, t in tensors.items():
        data = t.detach().contiguous().to(torch.float32).numpy().tobytes()
        header[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for blob in blobs:
            f.write(blob)


def vit_tiny_torchvision(target):
    """torchvision's own ViT (its names), the input, its logits, and its position embedding
    resampled to a 6x6 grid as timm's resample_abs_pos_embed does (bicubic, class token kept)."""
    import torchvision

    torch.manual_seed(27)
    model = torchvision.models.VisionTransformer(
        image_size=16, patch_size=4, num_layers=2, num_heads=4, hidden_dim=32, mlp_dim=128,
        num_classes=5)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("weight") and p.dim() == 2:
                p.mul_(3.0)
            elif "ln" in name or name.endswith("bias"):
                p.add_(0.2 * torch.randn_like(p))
        model.encoder.pos_embedding.normal_(0, 0.5)
        model.class_token.normal_(0, 0.5)
    model.eval()
    x = torch.randn(2, 3, 16, 16)
    logits = model(x).detach()
    pos = model.encoder.pos_embedding.detach()
    grid = pos[:, 1:].reshape(1, 4, 4, 32).permute(0, 3, 1, 2)
    grid = F.interpolate(grid, size=(6, 6), mode="bicubic", antialias=False, align_corners=False)
    resampled = torch.cat([pos[:, :1], grid.permute(0, 2, 3, 1).reshape(1, 36, 32)], dim=1)
    write_safetensors(target / "vit_tiny_torchvision.weights.safetensors", model.state_dict(),
                      {"format": "pt"})
    pth_fixtures(target, model.state_dict())
    write_safetensors(target / "vit_tiny_torchvision.expected.safetensors",
                      OrderedDict(input=x, logits=logits, pos_embed_6x6=resampled),
                      {"spec": "vit:4-32-2-4-5"})
    print("wrote", target / "vit_tiny_torchvision.weights.safetensors")


class Bottleneck(nn.Module):
    """torchvision's Bottleneck (ResNet v1.5: the stride on the 3x3), its names."""

    def __init__(self, inplanes, planes, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(inplanes, planes, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, stride=stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv3 = nn.Conv2d(planes, planes * 4, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(planes * 4)
        self.relu = nn.ReLU()
        self.downsample = None
        if stride != 1 or inplanes != planes * 4:
            self.downsample = nn.Sequential(
                nn.Conv2d(inplanes, planes * 4, 1, stride=stride, bias=False),
                nn.BatchNorm2d(planes * 4))

    def forward(self, x):
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return self.relu(out + (x if self.downsample is None else self.downsample(x)))


class TinyResNet(nn.Module):
    """torchvision's ResNet layout with one bottleneck per stage and a first width of 8."""

    def __init__(self, width, classes):
        super().__init__()
        self.conv1 = nn.Conv2d(3, width, 7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.relu = nn.ReLU()
        self.maxpool = nn.MaxPool2d(3, stride=2, padding=1)
        inplanes = width
        for stage in range(4):
            planes = width << stage
            setattr(self, "layer%d" % (stage + 1),
                    nn.Sequential(Bottleneck(inplanes, planes, 1 if stage == 0 else 2)))
            inplanes = planes * 4
        self.fc = nn.Linear(inplanes, classes)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        for stage in range(4):
            x = getattr(self, "layer%d" % (stage + 1))(x)
        return self.fc(x.mean(dim=(2, 3)))


def relu_margin(model, x):
    """The smallest |value| entering any ReLU of the forward, over that tensor's RMS, in float64."""
    worst = [float("inf")]

    def hook(module, inputs, output):
        v = inputs[0].detach()
        worst[0] = min(worst[0], (v.abs().min() / v.pow(2).mean().sqrt()).item())

    # A copy: the forward (in training mode, batch statistics, as the golden's) moves the batch
    # norms' running statistics, which the golden records after its own four forwards.
    model = copy.deepcopy(model).double()
    for m in model.modules():
        if isinstance(m, nn.ReLU):
            m.register_forward_hook(hook)
    with torch.no_grad():
        model(x.double())
    return worst[0]


def input_off_the_kinks(model, shape, seeds=200):
    """The input (of the first `seeds` seeds) whose ReLU inputs all stay farthest from 0.

    A ReLU input within float32 rounding of 0 is a kink: engines that sum in other orders take
    opposite sides of it and pass or block that element's gradient, a difference no gradient
    tolerance should absorb. The engines' forwards differ by about 1e-6 of a tensor's scale
    (5e-7 on the logits, a few 1e-6 at worst); with tens of thousands of elements a tensor a
    random input puts its smallest |value| near 1e-6 of the RMS as often as not (the first
    input of seed 28 had -1.5e-6 entering layer1.0's last ReLU, which the Java engine summed
    to 0.0 and oneDNN to 3e-7). The chosen input keeps every ReLU input 30x farther away."""
    best = None
    for seed in range(seeds):
        x = torch.randn(*shape, generator=torch.Generator().manual_seed(seed))
        margin = relu_margin(model, x)
        if best is None or margin > best[1]:
            best = (x, margin)
    assert best[1] >= 3e-5, "no input of %d seeds keeps the ReLUs 3e-5 off their kinks" % seeds
    return best


def resnet_tiny_golden(target):
    torch.manual_seed(28)
    model = TinyResNet(width=8, classes=5)
    with torch.no_grad():  # batch norms away from 1/0, so their gradients are tested too
        for name, p in model.named_parameters():
            if ".bn" in name or name.startswith("bn") or "downsample.1" in name:
                p.copy_((1.0 if name.endswith("weight") else 0.0) + 0.2 * torch.randn_like(p))
    # 64x64 and 4 images: the last stage's batch norms see 16 values a channel (at 32x32 and 3
    # images, 3: statistics so ill-conditioned that float32 summation order alone moves a step)
    x, margin = input_off_the_kinks(model, (4, 3, 64, 64))
    labels = torch.tensor([0, 3, 4, 1])
    # AdamW at lr 1e-4: from its second step Adam divides each gradient by its running RMS, so
    # where a gradient passes near 0 float32 noise in it (about 4e-6 of a tensor's largest, the
    # engines' measured spread) moves the weight by up to lr. At lr 1e-3 that moved the third
    # loss by up to 1.8e-4 of itself in float64 trials with such noise (beyond the forward's
    # 1e-4); at 1e-4 by 4.5e-6, while the losses still fall 1.46 -> 1.22 -> 1.04.
    tensors, metadata = record("resnet-tiny", model, x, labels, lr=1e-4)
    metadata["relu_margin"] = "%.3e" % margin
    for name, b in model.named_buffers():  # the running statistics after the 3 AdamW steps' 4
        if not name.endswith("num_batches_tracked"):  # training forwards
            tensors["buffer/" + name] = b.detach().clone()
    write_safetensors(target / "resnet_tiny.safetensors", tensors, metadata)
    print("wrote", target / "resnet_tiny.safetensors", len(tensors), "tensors")


class AnchorCnn(nn.Module):
    """The Fashion-MNIST anchor's CNN (../shared/anchors/pytorch_fmnist.py) at other widths:
    ramtrain's cnn:cA-p-cB-p-fH-CLASSES."""

    def __init__(self, channels, first, second, image, hidden, classes):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, first, 3, padding=1)
        self.conv2 = nn.Conv2d(first, second, 3, padding=1)
        self.fc1 = nn.Linear(second * (image // 4) ** 2, hidden)
        self.fc2 = nn.Linear(hidden, classes)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc2(F.relu(self.fc1(x.flatten(1))))


def cnn_anchor_golden(target):
    """16 and 32 channels: whole blocks of the CPU engine's channel blocking (16 with AVX-512, 8
    below), so its blocked layers run; 10x10 images, odd after the first pooling."""
    torch.manual_seed(27)
    model = AnchorCnn(channels=1, first=16, second=32, image=10, hidden=8, classes=3)
    x = torch.randn(4, 1, 10, 10)
    labels = torch.tensor([2, 0, 1, 2])
    tensors, metadata = record("cnn:c16-p-c32-p-f8-3", model, x, labels)
    write_safetensors(target / "cnn_anchor.safetensors", tensors, metadata)
    print("wrote", target / "cnn_anchor.safetensors", len(tensors), "tensors")


class CifarBlock(nn.Module):
    """He et al.'s CIFAR basic block, the anchor's BasicBlock: 1x1 conv + BN shortcut where the
    shape changes."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                            nn.BatchNorm2d(cout))

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + (x if self.downsample is None else self.downsample(x)))


class CifarResNet(nn.Module):
    """The anchor's ResNet20 with one block a stage: ramtrain's resnet:8-WIDTH-CLASSES."""

    def __init__(self, channels, width, classes):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, width, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.layer1 = nn.Sequential(CifarBlock(width, width, 1))
        self.layer2 = nn.Sequential(CifarBlock(width, 2 * width, 2))
        self.layer3 = nn.Sequential(CifarBlock(2 * width, 4 * width, 2))
        self.fc = nn.Linear(4 * width, classes)

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)))
        x = self.layer3(self.layer2(self.layer1(x)))
        return self.fc(F.adaptive_avg_pool2d(x, 1).flatten(1))


def cifar_resnet_golden(target):
    """Widths 16, 32, 64, as ResNet-20's: channels-last on the CPU engine. 16x16 images and 4 of
    them: the last stage's batch norms see 64 values a channel."""
    torch.manual_seed(29)
    model = CifarResNet(channels=1, width=16, classes=3)
    with torch.no_grad():  # batch norms away from 1/0, so their gradients are tested too
        for name, p in model.named_parameters():
            if "bn" in name or "downsample.1" in name:
                p.copy_((1.0 if name.endswith("weight") else 0.0) + 0.2 * torch.randn_like(p))
    x = torch.randn(4, 1, 16, 16)
    labels = torch.tensor([1, 2, 0, 1])
    tensors, metadata = record("resnet:8-16-3", model, x, labels)
    for name, b in model.named_buffers():
        if not name.endswith("num_batches_tracked"):
            tensors["buffer/" + name] = b.detach().clone()
    write_safetensors(target / "cifar_resnet.safetensors", tensors, metadata)
    print("wrote", target / "cifar_resnet.safetensors", len(tensors), "tensors")


class LayerNorm2d(nn.LayerNorm):
    """timm's LayerNorm2d: nn.LayerNorm over the channels of NCHW."""

    def forward(self, x):
        return F.layer_norm(x.permute(0, 2, 3, 1), self.normalized_shape, self.weight, self.bias,
                            self.eps).permute(0, 3, 1, 2)


class ConvNeXtBlock(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.conv_dw = nn.Conv2d(dim, dim, 7, padding=3, groups=dim)
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.mlp = Mlp(dim, 4 * dim)
        self.gamma = nn.Parameter(torch.full((dim,), 1e-6))

    def forward(self, x):
        shortcut = x
        x = self.conv_dw(x).permute(0, 2, 3, 1)
        x = self.mlp(self.norm(x)).permute(0, 3, 1, 2)
        return x.mul(self.gamma.reshape(1, -1, 1, 1)) + shortcut


class ConvNeXtStage(nn.Module):
    """timm's stage: stages after the first open with a stride-2 downsample, whatever the widths."""

    def __init__(self, inputs, dim, depth, first):
        super().__init__()
        self.downsample = nn.Identity() if first else nn.Sequential(
            LayerNorm2d(inputs, eps=1e-6), nn.Conv2d(inputs, dim, 2, stride=2))
        self.blocks = nn.Sequential(*[ConvNeXtBlock(dim) for _ in range(depth)])

    def forward(self, x):
        return self.blocks(self.downsample(x))


class ConvNeXtHead(nn.Module):
    def __init__(self, dim, classes):
        super().__init__()
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.fc = nn.Linear(dim, classes)


class ConvNeXt(nn.Module):
    """timm's ConvNeXt (its module names), a LayerNorm2d stem, no dropout or drop path."""

    def __init__(self, depths, dims, classes):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, dims[0], 4, stride=4), LayerNorm2d(dims[0], eps=1e-6))
        self.stages = nn.Sequential(*[
            ConvNeXtStage(dims[max(i - 1, 0)], dims[i], depths[i], i == 0) for i in range(4)])
        self.head = ConvNeXtHead(dims[-1], classes)

    def forward(self, x):
        x = self.stages(self.stem(x)).mean(dim=(2, 3))
        return self.head.fc(self.head.norm(x))


def convnext_tiny_golden(target):
    torch.manual_seed(29)
    model = ConvNeXt(depths=(1, 1, 1, 1), dims=(8, 16, 16, 16), classes=5)
    with torch.no_grad():  # layer scale and norms away from their starts: the blocks count
        for name, p in model.named_parameters():
            if name.endswith("gamma"):
                p.copy_(0.5 + 0.2 * torch.randn_like(p))
            elif "norm" in name or name.startswith("stem.1") or "downsample.0" in name:
                p.copy_((1.0 if name.endswith("weight") else 0.0) + 0.2 * torch.randn_like(p))
    x = torch.randn(3, 3, 64, 64)
    labels = torch.tensor([2, 0, 4])
    tensors, metadata = record("convnext-tiny", model, x, labels)
    write_safetensors(target / "convnext_tiny.safetensors", tensors, metadata)
    print("wrote", target / "convnext_tiny.safetensors", len(tensors), "tensors")


def convnext_tiny_torchvision(target):
    """torchvision's own ConvNeXt (its names: features.N, block.0/2/3/5, layer_scale [C,1,1],
    classifier), one block per stage, and its logits in float64 on a 64x64 batch."""
    from torchvision.models.convnext import ConvNeXt as TvConvNeXt, CNBlockConfig

    torch.manual_seed(30)
    model = TvConvNeXt([CNBlockConfig(8, 16, 1), CNBlockConfig(16, 16, 1), CNBlockConfig(16, 16, 1),
                        CNBlockConfig(16, None, 1)], num_classes=5)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("layer_scale"):
                p.copy_(0.5 + 0.2 * torch.randn_like(p))
    model = model.double().eval()
    x = torch.randn(2, 3, 64, 64, dtype=torch.float64)
    logits = model(x).detach()
    write_safetensors(target / "convnext_tiny_torchvision.weights.safetensors", model.state_dict(),
                      {"format": "pt"})
    write_safetensors(target / "convnext_tiny_torchvision.expected.safetensors",
                      OrderedDict(input=x, logits=logits), {"spec": "convnext 8-16-16-16"})
    print("wrote", target / "convnext_tiny_torchvision.weights.safetensors")


class _Evil:
    """A pickle that runs a shell command when unpickled: what a weights file must never do."""

    def __reduce__(self):
        import os
        return (os.system, ("touch /tmp/ramtrain-pickle-executed",))


class _Counter:
    """__reduce__ of a harmless-looking class that is not a tensor."""

    def __reduce__(self):
        return (collections.Counter, (["a", "b"],))


def pth_fixtures(target, vit_state_dict):
    """torch.save files: the tiny ViT's state dict, a dict of every dtype ramtrain reads with a
    non-contiguous tensor and a module's _metadata, and hostile ones."""
    torch.save(vit_state_dict, target / "vit_tiny_torchvision.pth")
    mixed = nn.Sequential(nn.Linear(3, 2)).state_dict()  # carries _metadata (BUILD)
    mixed["half"] = torch.tensor([1.5, -2.0, 65504.0], dtype=torch.float16)
    mixed["bf16"] = torch.tensor([1.5, -3.140625], dtype=torch.bfloat16)
    mixed["count"] = torch.tensor(12345)
    mixed["transposed"] = torch.arange(6, dtype=torch.float32).reshape(2, 3).t()
    mixed["sliced"] = torch.arange(10, dtype=torch.float32)[2:8:2]
    torch.save(mixed, target / "dtypes.pth")
    torch.save({"w": _Evil()}, target / "hostile_system.pth")
    torch.save({"w": _Counter()}, target / "hostile_reduce.pth")
    # A storage that claims 10^12 floats over a 40-byte entry: refused before allocating.
    import pickle
    import zipfile

    class Marker:
        pass

    marker = Marker()

    class Pickler(pickle.Pickler):
        def persistent_id(self, obj):
            if obj is marker:
                return ("storage", torch.FloatStorage, "0", "cpu", 10 ** 12)
            return None

    class Huge:
        def __reduce__(self):
            return (torch._utils._rebuild_tensor_v2,
                    (marker, 0, (10,), (1,), False, collections.OrderedDict()))

    buffer = io.BytesIO()
    Pickler(buffer, protocol=2).dump(collections.OrderedDict(w=Huge()))
    def entry(name):  # a fixed date: the file is the same whatever day it is regenerated
        return zipfile.ZipInfo("hostile_huge/" + name, date_time=(1980, 1, 1, 0, 0, 0))

    with zipfile.ZipFile(target / "hostile_huge.pth", "w", zipfile.ZIP_STORED) as z:
        z.writestr(entry("data.pkl"), buffer.getvalue())
        z.writestr(entry("data/0"), b"\0" * 40)
        z.writestr(entry("version"), "3\n")
    print("wrote the .pth fixtures")


def write_keys(path, model):
    """A state dict's keys and shapes in order, one "name d0,d1,..." line each."""
    with open(path, "w") as f:
        for name, t in model.state_dict().items():
            f.write(name + " " + ",".join(str(d) for d in t.shape) + "\n")


def main():
    target = Path(sys.argv[1] if len(sys.argv) > 1 else "trainer/src/test/resources/goldens")
    target.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(1)  # one summation order, whatever machine regenerates the files
    spec, model, x, labels = vit_tiny_golden()
    tensors, metadata = record(spec, model, x, labels)
    write_safetensors(target / "vit_tiny.safetensors", tensors, metadata)
    print("wrote", target / "vit_tiny.safetensors", len(tensors), "tensors")
    vit_tiny_torchvision(target)
    resnet_tiny_golden(target)
    cnn_anchor_golden(target)
    cifar_resnet_golden(target)
    convnext_tiny_golden(target)
    convnext_tiny_torchvision(target)
    import torchvision
    write_keys(target / "resnet50.keys", torchvision.models.resnet50())
    print("wrote", target / "resnet50.keys")
    # ViT-B/16 at full size: the key list a timm checkpoint of it carries (ImageNet's 1000 classes)
    base = VisionTransformer(image=224, patch=16, channels=3, dim=768, depth=12, heads=12, classes=1000)
    write_keys(target / "vit_base_patch16_224.keys", base)
    print("wrote", target / "vit_base_patch16_224.keys", sum(p.numel() for p in base.parameters()), "parameters")


if __name__ == "__main__":
    main()
