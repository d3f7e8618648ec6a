#!/usr/bin/python3
"""PyTorch's side of benchmarks/models.sh: AdamW training steps of a torchvision model on random
224x224 batches, the median step after two warm-up steps, as samples per second."""
import argparse
import statistics
import time

import torch
import torch.nn.functional as F
import torchvision

p = argparse.ArgumentParser()
p.add_argument("--model", default="vit_b_16")
p.add_argument("--batch", type=int, default=8)
p.add_argument("--threads", type=int, default=2)
p.add_argument("--steps", type=int, default=4)
a = p.parse_args()
torch.set_num_threads(a.threads)
torch.manual_seed(0)
model = getattr(torchvision.models, a.model)(num_classes=1000)
model.train()
opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.05)
x = torch.randn(a.batch, 3, 224, 224)
y = torch.randint(0, 1000, (a.batch,))
times = []
losses = []
for _ in range(a.steps + 2):
    start = time.perf_counter()
    opt.zero_grad()
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    times.append(time.perf_counter() - start)
    losses.append(round(loss.item(), 4))
median = statistics.median(times[2:])
print(f"pytorch {torch.__version__} {a.model} batch {a.batch} threads {a.threads}: median step "
      f"{median:.2f} s, {a.batch / median:.2f} samples/s, losses {losses}")
