#!/usr/bin/python3
"""Plots the training and validation loss of an examples/gpt.spmd run.

    /usr/bin/python3 scripts/gpt_plot.py LOG [-o loss.png] [--meta DATA/meta.json]

LOG is the program's output (scripts/main.sh keeps it as build/gpt_run/train.log):
lines `step N train X ...` (the mean training loss of the steps since the
previous such line) and `step N val Y` (the validation loss after N steps).
With --meta (scripts/gpt_data.py's meta.json) the plot also shows the
unigram entropy of the text, the loss of the best model that ignores
context. A run that was resumed logs some steps twice; the later lines win.
"""
import argparse
import json
import re
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

LINE = re.compile(r"^step (\d+) (train|val) ([-+0-9.eE]+|nan|inf)")


def read_log(path):
    curves = {"train": {}, "val": {}}
    with open(path, errors="replace") as f:
        for line in f:
            m = LINE.match(line.strip())
            if m:
                curves[m.group(2)][int(m.group(1))] = float(m.group(3))
    return {k: sorted(v.items()) for k, v in curves.items()}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("log")
    ap.add_argument("-o", "--output", default="loss.png")
    ap.add_argument("--meta", help="meta.json of scripts/gpt_data.py (unigram entropy)")
    ap.add_argument("--title", default="examples/gpt.spmd on the fortunes corpus")
    args = ap.parse_args()
    curves = read_log(args.log)
    if not curves["train"] and not curves["val"]:
        sys.exit(f"gpt_plot: no 'step N train X' or 'step N val Y' lines in {args.log}")
    fig, ax = plt.subplots(figsize=(7, 4.5), dpi=120)
    for name, style in (("train", "-"), ("val", "o-")):
        if curves[name]:
            xs, ys = zip(*curves[name])
            ax.plot(xs, ys, style, label=f"{name} (last {ys[-1]:.3f})", markersize=4)
    if args.meta:
        with open(args.meta) as f:
            meta = json.load(f)
        h = meta["unigram_entropy"]
        ax.axhline(h, color="gray", linestyle="--", label=f"unigram entropy {h:.3f}")
    ax.set_xlabel("step")
    ax.set_ylabel("cross-entropy (nats per byte)")
    ax.set_title(args.title)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(args.output)
    print(f"gpt_plot: wrote {args.output}")


if __name__ == "__main__":
    main()
