#!/usr/bin/env python3
"""Writes the first N t10k digits as PGM images with a labels.csv in the layout of
scripts/make_handwriting_set.py, so that scripts/handwriting_accuracy.sh measures how well
`lenet5 classify` (its loading and preprocessing included) reads MNIST itself. A change to the
preprocessing that helps photographs must not cost these.

    scripts/mnist_as_images.py --out /tmp/mnist1000 [--count 1000] [--mnist data/mnist]
    scripts/handwriting_accuracy.sh CHECKPOINT --set /tmp/mnist1000 -- --device cpu

Needs only python3's standard library and the IDX files of scripts/fetch_mnist.sh.
"""
import argparse
import os
import sys

IMAGE_BYTES = 28 * 28
IMAGES_HEADER = 16  # magic, count, rows, cols: 4 big-endian int32s
LABELS_HEADER = 8   # magic, count


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="folder to write (created if missing)")
    parser.add_argument("--count", type=int, default=1000, help="how many digits (default 1000)")
    parser.add_argument("--mnist", default=os.path.join(root, "data", "mnist"),
                        help="folder of the IDX files (default data/mnist)")
    args = parser.parse_args()
    paths = [os.path.join(args.mnist, name)
             for name in ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")]
    for path in paths:
        if not os.path.isfile(path):
            sys.exit(f"mnist_as_images: {path} not found: run scripts/fetch_mnist.sh first")
    images = open(paths[0], "rb").read()
    labels = open(paths[1], "rb").read()
    count = min(args.count, len(labels) - LABELS_HEADER)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "labels.csv"), "w") as csv:
        csv.write("file,digit,family,face,polarity,style,size,stroke\n")
        for i in range(count):
            digit = labels[LABELS_HEADER + i]
            start = IMAGES_HEADER + IMAGE_BYTES * i
            name = f"{i:04d}_{digit}.pgm"
            with open(os.path.join(args.out, name), "wb") as pgm:
                pgm.write(b"P5\n28 28\n255\n" + images[start:start + IMAGE_BYTES])
            csv.write(f"{name},{digit},mnist,mnist,light-on-dark,clean,28,mnist\n")
    print(f"mnist_as_images: wrote {count} digits to {args.out}")


if __name__ == "__main__":
    main()
