#!/usr/bin/python3
"""Real-photo JPEG set for the ETL benchmark (benchmarks/etl.sh --photos).

N JPEGs (default 2,000) of 500x375 pixels, quality 90 (Pillow's defaults otherwise), cut from
photographs Debian packages ship: the nature photos of mate-backgrounds and the photographic
wallpapers of plasma-workspace-wallpapers (apt-get install mate-backgrounds
plasma-workspace-wallpapers). Each image is a random window of one photo (1x to 3x the output size,
so detail varies as in real datasets), resized with Lanczos; 10 class folders by source photo.
Seeded, so the set is the same on every run with the same packages and Pillow. --size S makes S x S
windows instead (the JPEG loader benchmark's stored images: a dataset stored at that size keeps
these bytes as they are).

Usage: /usr/bin/python3 make_photos.py [--out DIR] [--n 2000] [--size S]
"""
import argparse
import hashlib
import os
import random

from PIL import Image

DEFAULT_SIZE = (500, 375)
SOURCES = [
    *(f"/usr/share/backgrounds/mate/nature/{n}.jpg" for n in (
        "Aqua", "Blinds", "Dune", "FreshFlower", "Garden", "GreenMeadow", "LadyBird",
        "RainDrops", "Storm", "TwoWings", "Wood", "YellowFlower")),
    *(f"/usr/share/wallpapers/{n}/contents/images/2560x1600.jpg" for n in (
        "Autumn", "BytheWater", "ColdRipple", "ColorfulCups", "EveningGlow", "FallenLeaf",
        "OneStandsOut", "Path")),
]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default="/tmp/ramtrain-photo-jpegs")
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--size", type=int, default=0)
    args = parser.parse_args()
    W, H = (args.size, args.size) if args.size else DEFAULT_SIZE
    missing = [s for s in SOURCES if not os.path.exists(s)]
    if missing:
        raise SystemExit("missing photos (apt-get install mate-backgrounds "
                         "plasma-workspace-wallpapers): " + ", ".join(missing))
    photos = [Image.open(s).convert("RGB") for s in SOURCES]
    rng = random.Random(20261123)
    digest = hashlib.sha256()
    total = 0
    for i in range(args.n):
        s = i % len(photos)
        photo = photos[s]
        scale = rng.uniform(1.0, min(3.0, photo.width / W, photo.height / H))
        w, h = int(W * scale), int(H * scale)
        x = rng.randrange(0, photo.width - w + 1)
        y = rng.randrange(0, photo.height - h + 1)
        crop = photo.crop((x, y, x + w, y + h)).resize((W, H), Image.LANCZOS)
        folder = os.path.join(args.out, f"class_{s % 10}")
        os.makedirs(folder, exist_ok=True)
        path = os.path.join(folder, f"photo_{i:05d}.jpg")
        crop.save(path, quality=90)
        with open(path, "rb") as f:
            data = f.read()
        digest.update(data)
        total += len(data)
    print(f"{args.n} photos of {W}x{H} in {args.out}: {total:,} bytes, sha256 {digest.hexdigest()}")


if __name__ == "__main__":
    main()
