#!/usr/bin/python3
"""Data preparation for examples/gpt.spmd: byte-level tokens of real text.

    /usr/bin/python3 scripts/gpt_data.py OUTDIR                 # the fortunes corpus
    /usr/bin/python3 scripts/gpt_data.py OUTDIR --text FILE...  # any text files

The corpus is the English fortune files of Debian's `fortunes` and
`fortunes-min` packages (/usr/share/games/fortunes, ASCII art left out).
Each fortune (the text between `%` lines) is one document; documents are
shuffled with a fixed seed and the last VAL_FRACTION of them form the
validation set, so no fortune is split between the two.

Tokens are bytes (vocabulary 256, so the vocabulary splits evenly over any
power-of-two `tp`), stored as token files, nanoGPT's raw little-endian
uint16 (examples/gpt.spmd and gpt2_small.spmd read them with token_batch,
docs/weights.md), and as int32 .npy arrays (what NumPy and PyTorch readers
use: bench/gpt_torch.py, examples/gpt_train.py, examples/gpt_pp.spmd).
Written:

    OUTDIR/train.bin    the training tokens                  uint16[NTRAIN]
    OUTDIR/val.bin      the validation tokens                uint16[NVAL]
    OUTDIR/tokens.npy   every token, train then val          i32[N]
    OUTDIR/train.npy    the training tokens                  i32[NTRAIN]
    OUTDIR/val.npy      the validation tokens                i32[NVAL]
    OUTDIR/meta.json    sizes and the unigram baselines (nats)
    OUTDIR/sizes.sh     NTRAIN=... NVAL=... for `spmdc -D`

The unigram entropy H = -sum_b p(b) ln p(b) of the training bytes is the
loss of the best model that ignores context; `unigram_val_xent` is that
model's loss on the validation bytes (add-one smoothed counts), the number a
trained GPT's validation loss must go clearly below.
"""
import argparse
import json
import os
import sys

import numpy as np

FORTUNES = "/usr/share/games/fortunes"
SKIP = {"art", "ascii-art"}          # pictures, not text
VAL_FRACTION = 0.05
SEED = 1234


def fortune_files(root):
    names = sorted(n for n in os.listdir(root)
                   if "." not in n and n not in SKIP
                   and os.path.isfile(os.path.join(root, n)))
    if not names:
        sys.exit(f"gpt_data: no fortune files in {root} (apt-get install fortunes)")
    return [os.path.join(root, n) for n in names]


def documents(paths, fortune_format):
    docs = []
    for p in paths:
        data = open(p, "rb").read()
        if fortune_format:
            # fortune files: entries separated by lines holding only '%'
            for d in data.split(b"\n%\n"):
                d = d.strip(b"%\n")
                if d:
                    docs.append(d + b"\n%\n")
        else:
            # plain text: paragraphs are the documents
            for d in data.split(b"\n\n"):
                if d.strip():
                    docs.append(d.strip(b"\n") + b"\n\n")
    return docs


def unigram(train, val):
    counts = np.bincount(train, minlength=256).astype(np.float64)
    p = counts / counts.sum()
    nz = p > 0
    entropy = float(-(p[nz] * np.log(p[nz])).sum())
    smoothed = (counts + 1.0) / (counts.sum() + 256.0)
    val_xent = float(-np.log(smoothed[val]).mean()) if len(val) else float("nan")
    return entropy, val_xent


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("outdir")
    ap.add_argument("--text", nargs="+", help="plain text files instead of the fortunes corpus")
    ap.add_argument("--val-fraction", type=float, default=VAL_FRACTION)
    args = ap.parse_args()

    if args.text:
        docs = documents(args.text, fortune_format=False)
        source = " ".join(args.text)
    else:
        docs = documents(fortune_files(FORTUNES), fortune_format=True)
        source = FORTUNES
    if len(docs) < 2:
        sys.exit("gpt_data: need at least two documents")
    order = np.random.default_rng(SEED).permutation(len(docs))
    nval = max(1, int(round(len(docs) * args.val_fraction)))
    train_docs = [docs[i] for i in order[:-nval]]
    val_docs = [docs[i] for i in order[-nval:]]
    train = np.frombuffer(b"".join(train_docs), dtype=np.uint8).astype(np.int32)
    val = np.frombuffer(b"".join(val_docs), dtype=np.uint8).astype(np.int32)

    os.makedirs(args.outdir, exist_ok=True)
    np.save(os.path.join(args.outdir, "tokens.npy"), np.concatenate([train, val]))
    np.save(os.path.join(args.outdir, "train.npy"), train)
    np.save(os.path.join(args.outdir, "val.npy"), val)
    train.astype("<u2").tofile(os.path.join(args.outdir, "train.bin"))
    val.astype("<u2").tofile(os.path.join(args.outdir, "val.bin"))
    entropy, val_xent = unigram(train, val)
    meta = {
        "source": source,
        "documents": len(docs),
        "vocab": 256,
        "ntrain": int(len(train)),
        "nval": int(len(val)),
        "unigram_entropy": entropy,
        "unigram_val_xent": val_xent,
    }
    with open(os.path.join(args.outdir, "meta.json"), "w") as f:
        json.dump(meta, f, indent=2)
        f.write("\n")
    with open(os.path.join(args.outdir, "sizes.sh"), "w") as f:
        f.write(f"NTRAIN={len(train)}\nNVAL={len(val)}\n")
    print(f"gpt_data: {len(docs)} documents from {source}: "
          f"{len(train)} train and {len(val)} val tokens (bytes)")
    print(f"gpt_data: unigram entropy {entropy:.4f} nats/token, "
          f"unigram cross-entropy on val {val_xent:.4f} nats/token")


if __name__ == "__main__":
    main()
