#!/usr/bin/python3
"""The anchor of the JPEG loader benchmark (benchmarks/loader_jpeg.sh): torchvision's ImageNet
training pipeline on JPEGs held in memory (the bytes ramtrain's JPEG-column dataset of the same
folder stores): PIL decode, RandomResizedCrop (PIL's antialiased bilinear) and RandomHorizontalFlip,
PILToTensor, in a torch DataLoader with WORKERS workers, batches collated as a trainer gets them.
Prints one JSON line: images/s of each epoch after the first (the workers' start-up).

Usage: /usr/bin/python3 loader_jpeg_torch.py FOLDER OUT BATCH WORKERS EPOCHS
"""
import io
import json
import os
import sys
import time

import PIL
import torch
import torchvision
import torchvision.transforms as T
from PIL import Image


class Jpegs(torch.utils.data.Dataset):
    def __init__(self, folder, transform):
        self.items = []
        for label, name in enumerate(sorted(os.listdir(folder))):
            sub = os.path.join(folder, name)
            for f in sorted(os.listdir(sub)):
                with open(os.path.join(sub, f), "rb") as fh:
                    self.items.append((fh.read(), label))
        self.transform = transform

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        data, label = self.items[i]
        image = Image.open(io.BytesIO(data)).convert("RGB")
        return self.transform(image), label


def main():
    folder = sys.argv[1]
    out, batch, workers, epochs = (int(a) for a in sys.argv[2:6])
    transform = T.Compose([T.RandomResizedCrop(out), T.RandomHorizontalFlip(), T.PILToTensor()])
    data = Jpegs(folder, transform)
    loader = torch.utils.data.DataLoader(
        data, batch_size=batch, shuffle=True, num_workers=workers, drop_last=True,
        persistent_workers=True)
    rates = []
    for _ in range(epochs):
        start = time.perf_counter()
        seen = 0
        for images, _labels in loader:
            seen += images.shape[0]
        rates.append(seen / (time.perf_counter() - start))
    print(json.dumps({"anchor": "torchvision+PIL", "torch": torch.__version__,
                      "torchvision": torchvision.__version__, "pillow": PIL.__version__,
                      "images": len(data), "out": out, "batch": batch, "workers": workers,
                      "images_per_s": [round(r, 1) for r in rates[1:]]}))


if __name__ == "__main__":
    main()
