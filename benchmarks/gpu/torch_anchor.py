#!/usr/bin/env python3
"""PyTorch's side of `GpuBench memory` and `GpuBench gemm` on a GPU.

torch_anchor.py BATCH MODES MODEL...: AdamW training steps of torchvision models on random 224x224
batches; the median step after two warm-up steps and torch.cuda.max_memory_allocated, the figures
beside ramtrain's. MODES is a comma list of
  fp32  TF32 off everywhere (as ramtrain's ramtrain.cuda.tf32=off),
  tf32  PyTorch's defaults: TF32 in cuDNN's convolutions, not in matmuls (ramtrain's default),
  bf16  torch.autocast(dtype=bfloat16) with the model and input channels_last,
  det   fp32 with cudnn.deterministic (ramtrain's convolutions keep to deterministic algorithms).
torch_anchor.py matmul N...: torch.matmul of n x n matrices, fp32 (TF32 off) and bf16, TFLOP/s by
CUDA events, best of 10 after warm-up (beside `GpuBench gemm`).
Models are torchvision's names: resnet50 vit_b_16 convnext_tiny vit_l_16 convnext_large."""
import statistics
import sys
import time

import torch
import torch.nn.functional as F


def tf32(convolutions, matmul):
    torch.backends.cudnn.allow_tf32 = convolutions
    torch.backends.cuda.matmul.allow_tf32 = matmul


def matmul(sizes):
    tf32(False, False)
    for n in sizes:
        for dtype in (torch.float32, torch.bfloat16):
            a = torch.randn(n, n, device="cuda").to(dtype)
            for _ in range(3):
                torch.matmul(a, a)
            best = float("inf")
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            for _ in range(10):
                start.record()
                torch.matmul(a, a)
                end.record()
                end.synchronize()
                best = min(best, start.elapsed_time(end) / 1e3)
            print(f"pytorch {torch.__version__} matmul {n}^3 {str(dtype).replace('torch.', '')}:"
                  f" {2 * n ** 3 / best / 1e12:.2f} TFLOP/s", flush=True)
            del a


def steps(batch, modes, names):
    import torchvision  # only here: matmul needs no torchvision

    for mode in modes:
        tf32(mode not in ("fp32", "det"), False)
        torch.backends.cudnn.deterministic = mode == "det"
        for name in names:
            torch.manual_seed(0)
            model = getattr(torchvision.models, name)(num_classes=1000).cuda().train()
            x = torch.randn(batch, 3, 224, 224, device="cuda")
            if mode == "bf16":
                model = model.to(memory_format=torch.channels_last)
                x = x.to(memory_format=torch.channels_last)
            opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.05)
            y = torch.randint(0, 1000, (batch,), device="cuda")
            torch.cuda.reset_peak_memory_stats()
            times = []
            for _ in range(7):
                torch.cuda.synchronize()
                start = time.perf_counter()
                opt.zero_grad(set_to_none=True)
                with torch.autocast("cuda", dtype=torch.bfloat16, enabled=mode == "bf16"):
                    loss = F.cross_entropy(model(x), y)
                loss.backward()
                opt.step()
                torch.cuda.synchronize()
                times.append(time.perf_counter() - start)
            median = statistics.median(times[2:])
            peak = torch.cuda.max_memory_allocated()
            print(f"pytorch {torch.__version__} {name} batch {batch} {mode}: resident step"
                  f" {median * 1e3:.2f} ms = {batch / median:.1f} samples/s; max_memory_allocated"
                  f" {peak / 2**30:.2f} GiB", flush=True)
            del model, opt, x, y
            torch.cuda.empty_cache()


if sys.argv[1] == "matmul":
    matmul([int(n) for n in sys.argv[2:]])
else:
    steps(int(sys.argv[1]), sys.argv[2].split(","), sys.argv[3:])
