#!/usr/bin/python3
"""PyTorch's CPU AdamW step, per parameter: the anchor for AdamWBench (ramtrain's host optimizer).

One fp32 parameter tensor of N elements with a gradient; times optimizer.step() after 3 warm-up
steps and prints the best, for each implementation torch offers here (foreach and the default
for-loop; fused AdamW is CUDA-only in torch 1.13).

  /usr/bin/python3 benchmarks/adamw_torch.py --params 20000000 --threads 2 --steps 10
"""
import argparse
import json
import time

import torch


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--params", type=int, default=20_000_000)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=10)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    for foreach in (False, True):
        p = torch.nn.Parameter(torch.full((args.params,), 0.5))
        p.grad = torch.full((args.params,), 0.01)
        opt = torch.optim.AdamW([p], lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01,
                                foreach=foreach)
        best = float("inf")
        for step in range(args.steps + 3):
            t = time.perf_counter()
            opt.step()
            if step >= 3:
                best = min(best, time.perf_counter() - t)
        print(json.dumps({"impl": "torch AdamW foreach=%s" % foreach, "torch": torch.__version__,
                          "params": args.params, "threads": args.threads,
                          "best_step_s": round(best, 5),
                          "ns_per_param": round(best * 1e9 / args.params, 3)}))


if __name__ == "__main__":
    main()
