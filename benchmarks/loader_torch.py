#!/usr/bin/python3
"""The anchor of the loader benchmark (benchmarks/loader.sh): torchvision's RandomResizedCrop and
RandomHorizontalFlip on uint8 CHW tensors in a torch DataLoader with 2 workers, over N stored
images held in memory (the pixels LoaderBench stores: (x*3 + y*5 + c*7 + i*11) mod 256), batches
collated as the trainer would get them. Prints one JSON line: images/s of each epoch after the
first (the workers' start-up).

Usage: /usr/bin/python3 loader_torch.py N SIZE OUT BATCH WORKERS EPOCHS ANTIALIAS(true|false)
"""
import json
import sys
import time

import torch
import torchvision
import torchvision.transforms as T


class Images(torch.utils.data.Dataset):
    def __init__(self, n, size, transform):
        y = torch.arange(size).view(1, size, 1)
        x = torch.arange(size).view(1, 1, size)
        c = torch.arange(3).view(3, 1, 1)
        base = x * 3 + y * 5 + c * 7
        self.images = torch.stack([((base + i * 11) % 256).to(torch.uint8) for i in range(n)])
        self.transform = transform

    def __len__(self):
        return len(self.images)

    def __getitem__(self, i):
        return self.transform(self.images[i]), i % 10


def main():
    n, size, out, batch, workers, epochs = (int(a) for a in sys.argv[1:7])
    antialias = sys.argv[7] == "true"
    transform = T.Compose([T.RandomResizedCrop(out, antialias=antialias), T.RandomHorizontalFlip()])
    data = Images(n, size, transform)
    loader = torch.utils.data.DataLoader(
        data, batch_size=batch, shuffle=True, num_workers=workers, drop_last=True,
        persistent_workers=True)
    rates = []
    for epoch in range(epochs):
        start = time.perf_counter()
        seen = 0
        for images, labels in loader:
            seen += images.shape[0]
        rates.append(seen / (time.perf_counter() - start))
    print(json.dumps({"anchor": "torchvision", "torch": torch.__version__,
                      "torchvision": torchvision.__version__, "antialias": antialias,
                      "images": n, "stored": size, "out": out, "batch": batch, "workers": workers,
                      "images_per_s": [round(r, 1) for r in rates[1:]]}))


if __name__ == "__main__":
    main()
