#!/usr/bin/env python3
"""Writes a smaller Fashion-MNIST: the first N training images and labels and every test image, as
the IDX .gz files sketchps reads (data.path), for a node without Debian's dataset-fashion-mnist
(scripts/bundle.sh puts one into the bundle for the GPU acceptance run).

    fmnist_subset.py --train N --out DIR [--src /usr/share/datasets/fashion-mnist]

Exit 0 when written; 2 when N is not in 1..the source's count or a source file is missing or not IDX
(the message names the file)."""
from __future__ import annotations

import argparse
import gzip
import struct
import sys
from pathlib import Path

FILES = {"train": ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"),
         "t10k": ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz")}
MAGIC = {3: 0x00000803, 1: 0x00000801}  # images (count, rows, cols), labels (count)


class SubsetError(Exception):
    pass


def read_idx(path: Path) -> tuple[list[int], bytes]:
    """(dimensions, data) of an IDX .gz file."""
    try:
        raw = gzip.decompress(path.read_bytes())
    except (OSError, EOFError) as e:
        raise SubsetError(f"{path}: cannot read it as gzip: {e}") from None
    if len(raw) < 8:
        raise SubsetError(f"{path}: shorter than an IDX header")
    magic, = struct.unpack(">I", raw[:4])
    ndim = magic & 0xFF
    if ndim not in MAGIC or magic != MAGIC[ndim] or len(raw) < 4 + 4 * ndim:
        raise SubsetError(f"{path}: magic {magic:#010x} is not an IDX file of unsigned bytes with 1 or 3 dimensions")
    dims = list(struct.unpack(f">{ndim}I", raw[4:4 + 4 * ndim]))
    data = raw[4 + 4 * ndim:]
    size = 1
    for d in dims:
        size *= d
    if len(data) != size:
        raise SubsetError(f"{path}: {len(data)} data bytes, the header says {size}")
    return dims, data


def write_idx(path: Path, dims: list[int], data: bytes) -> None:
    header = struct.pack(">I", MAGIC[len(dims)]) + struct.pack(f">{len(dims)}I", *dims)
    path.write_bytes(gzip.compress(header + data, compresslevel=6, mtime=0))


def subset(src: Path, out: Path, train: int) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for split, names in FILES.items():
        for name in names:
            path = src / name
            if not path.is_file():
                raise SubsetError(f"{path}: missing (apt-get install dataset-fashion-mnist, or --src)")
            dims, data = read_idx(path)
            keep = dims[0]
            if split == "train":
                if not 1 <= train <= dims[0]:
                    raise SubsetError(f"--train {train}: expected 1..{dims[0]} ({path} holds {dims[0]})")
                keep = train
            per_item = len(data) // dims[0]
            write_idx(out / name, [keep, *dims[1:]], data[:keep * per_item])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--train", type=int, required=True, help="training images to keep (the first N)")
    ap.add_argument("--out", required=True, help="folder for the four .gz files")
    ap.add_argument("--src", default="/usr/share/datasets/fashion-mnist", help="the full data set's folder")
    args = ap.parse_args(argv)
    try:
        subset(Path(args.src), Path(args.out), args.train)
    except SubsetError as e:
        print(f"fmnist_subset: {e}", file=sys.stderr)
        return 2
    print(f"fmnist_subset: {args.train} training and every test image in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
