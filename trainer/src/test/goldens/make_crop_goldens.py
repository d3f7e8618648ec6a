#!/usr/bin/python3
"""Goldens for ramtrain's load-time RandomResizedCrop (data.ResizedCrop, data.AntialiasedResize).

1. Crop parameters: torchvision's own RandomResizedCrop.get_params (10 tries, then the central
   fallback) run on uniform draws that ramtrain's loader also draws. torch's random calls inside
   get_params are replaced by a shim reading the next draw u in [0, 1) from a list, mapped as
   ramtrain maps it: uniform_(a, b) -> float32(a + (b - a) * u), randint(lo, hi) -> lo +
   floor(u * (hi - lo)). Everything else (float32 log and exp, Python's round half to even, the
   acceptance test and the fallback) is torchvision's code, unchanged.
2. Pixels: PIL's crop then resize with BILINEAR (antialiased: what torchvision's resized_crop does
   to a PIL image, and timm's eval Resize + CenterCrop), on small random images, RGB and L.

Run with Debian's python3-torch and python3-pil:

    /usr/bin/python3 trainer/src/test/goldens/make_crop_goldens.py trainer/src/test/resources/goldens

The Java tests (data.ResizedCropTest, data.AntialiasedResizeTest) read random_resized_crop.json.
"""
import json
import math
import random
import sys
import types
from pathlib import Path

import torch
import torchvision.transforms.transforms as tt
from PIL import Image


class Draws:
    def __init__(self, values):
        self.values = list(values)
        self.used = 0

    def next(self):
        u = self.values[self.used]
        self.used += 1
        return u


def shimmed_torch(draws):
    """torch, but for the random calls get_params makes, which read draws."""

    class Empty:
        def uniform_(self, a, b):
            a, b = float(a), float(b)
            return torch.tensor([a + (b - a) * draws.next()], dtype=torch.float32)

    def randint(lo, hi, size):
        return torch.tensor([lo + int(math.floor(draws.next() * (hi - lo)))])

    shim = types.SimpleNamespace(**{k: getattr(torch, k) for k in dir(torch) if not k.startswith("__")})
    shim.empty = lambda *size: Empty()
    shim.randint = randint
    return shim


def crop_params(height, width, scale, ratio, values):
    draws = Draws(values)
    real = tt.torch
    tt.torch = shimmed_torch(draws)
    try:
        img = torch.zeros(3, height, width)
        i, j, h, w = tt.RandomResizedCrop.get_params(img, list(scale), list(ratio))
    finally:
        tt.torch = real
    return {"top": i, "left": j, "height": h, "width": w, "drawsUsed": draws.used}


def param_cases(rng):
    cases = []
    sizes = [(256, 256), (224, 224), (375, 500), (500, 333), (32, 32), (7, 300), (300, 7), (1, 1)]
    settings = [((0.08, 1.0), (3 / 4, 4 / 3)), ((0.35, 1.0), (3 / 4, 4 / 3)), ((0.9, 1.0), (0.5, 2.0))]
    for height, width in sizes:
        for scale, ratio in settings:
            for _ in range(20):
                values = [rng.random() for _ in range(22)]
                case = {"imageHeight": height, "imageWidth": width, "scale": scale, "ratio": ratio}
                case["expected"] = crop_params(height, width, scale, ratio, values)
                case["draws"] = values[: case["expected"]["drawsUsed"]]  # what the crop reads
                cases.append(case)
    # Every try rejected (draws that ask for more than the image): the central fallback.
    for height, width, ratio in [(100, 10, (3 / 4, 4 / 3)), (10, 100, (3 / 4, 4 / 3)), (50, 60, (3 / 4, 4 / 3))]:
        values = [0.999999] * 20 + [0.5, 0.5]
        scale = (3.0, 4.0)
        case = {"imageHeight": height, "imageWidth": width, "scale": scale, "ratio": ratio, "draws": values}
        case["expected"] = crop_params(height, width, scale, ratio, values)
        cases.append(case)
    return cases


def pixel_cases(rng, images):
    cases = []
    for mode, channels in (("RGB", 3), ("L", 1)):
        height, width = 37, 45
        pixels = [rng.randrange(256) for _ in range(height * width * channels)]
        images.append({"channels": channels, "height": height, "width": width, "pixels": pixels})
        image = len(images) - 1
        img = Image.frombytes(mode, (width, height), bytes(pixels))
        crops = [  # top, left, crop height, crop width, out height, out width
            (0, 0, height, width, 16, 16),  # shrink more than 2x
            (3, 5, 30, 28, 24, 20),  # shrink by less than 2x, anisotropic
            (10, 2, 9, 13, 24, 31),  # enlarge
            (1, 1, 20, 20, 20, 20),  # same size: a plain crop
            (0, 40, 37, 5, 11, 3),  # a tall strip at the edge
            (5, 7, 23, 31, 23, 17),  # one axis resized, the other kept
        ]
        for top, left, ch, cw, oh, ow in crops:
            out = img.crop((left, top, left + cw, top + ch)).resize((ow, oh), Image.BILINEAR)
            cases.append({"image": image, "top": top, "left": left, "cropHeight": ch, "cropWidth": cw,
                          "outHeight": oh, "outWidth": ow, "expected": list(out.tobytes())})
        # timm's evaluation: Resize(shorter side to floor(out / crop_pct)) then CenterCrop(out).
        for out_size, crop_pct in ((16, 0.875), (20, 1.0), (24, 0.95)):
            scale_size = math.floor(out_size / crop_pct)
            if width < height:
                rw, rh = scale_size, int(scale_size * height / width)
            else:
                rh, rw = scale_size, int(scale_size * width / height)
            resized = img.resize((rw, rh), Image.BILINEAR)
            top = int(round((rh - out_size) / 2.0))
            left = int(round((rw - out_size) / 2.0))
            out = resized.crop((left, top, left + out_size, top + out_size))
            cases.append({"image": image, "centerCrop": True, "cropPct": crop_pct, "outHeight": out_size,
                          "outWidth": out_size, "expected": list(out.tobytes())})
    return cases


def main(out_dir):
    rng = random.Random(28)
    doc = {
        "generator": "trainer/src/test/goldens/make_crop_goldens.py",
        "torch": torch.__version__,
        "pil": Image.__version__,
        "params": param_cases(rng),
        "images": [],
    }
    doc["pixels"] = pixel_cases(rng, doc["images"])
    path = Path(out_dir) / "random_resized_crop.json"
    path.write_text(json.dumps(doc, separators=(",", ":")))
    print(path, len(doc["params"]), "parameter cases,", len(doc["pixels"]), "pixel cases")


if __name__ == "__main__":
    main(sys.argv[1])
