#!/usr/bin/env python3
"""PyTorch's side of `GpuBench memory` on a GPU: AdamW training steps of torchvision models in fp32
(TF32 off, as ramtrain's fp32 kernels compute) on random 224x224 batches; the median step after
two warm-up steps and torch.cuda.max_memory_allocated, the figure beside ramtrain's device peak.
Usage: torch_anchor.py BATCH MODEL... (torchvision's names: resnet50 vit_b_16 convnext_tiny ...)"""
import statistics
import sys
import time

import torch
import torch.nn.functional as F
import torchvision

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
batch = int(sys.argv[1])
for name in sys.argv[2:]:
    torch.manual_seed(0)
    model = getattr(torchvision.models, name)(num_classes=1000).cuda().train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.05)
    x = torch.randn(batch, 3, 224, 224, device="cuda")
    y = torch.randint(0, 1000, (batch,), device="cuda")
    torch.cuda.reset_peak_memory_stats()
    times = []
    for _ in range(7):
        torch.cuda.synchronize()
        start = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        F.cross_entropy(model(x), y).backward()
        opt.step()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    median = statistics.median(times[2:])
    peak = torch.cuda.max_memory_allocated()
    print(f"pytorch {torch.__version__} {name} batch {batch} fp32: resident step {median * 1e3:.2f}"
          f" ms = {batch / median:.1f} samples/s; max_memory_allocated {peak / 2**30:.2f} GiB",
          flush=True)
    del model, opt, x, y
    torch.cuda.empty_cache()
