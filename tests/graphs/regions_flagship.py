#!/usr/bin/python3
"""regions_flagship.py SPMDC: spmdc --regions classifies the flagship's
training step (examples/gpt.spmd, from the batch to AdamW and the loss
accumulator) as one capturable region: its `if` that saves the first
gradient is sunk below it, and the read of the batch from the token file
(token_batch, a host effect), the clock, the prints, the evaluation and
the checkpoints stay outside (docs/runtime.md "Graph regions"); its
step-dependent host scalars (dropout's seed, AdamW's step, the learning
rate) all reach its kernels through the slot table, none is taken by value
(which would refuse every replay).  With dropout on (-D DROPOUT=0.1): at
the flagship's 0.0 the compiler folds dropout away (compiler/callfuse.c)
and no kernel reads its seed."""
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
STEP = ('= batch(win)', 'value_and_grad(loss(', 'optim.clip_by_global_norm(', 'optim.adamw(',
        'acc = acc + all_reduce(')
OUTSIDE = ('token_batch("data/train.bin"', 'let now = wall_time()', 'print("step", step + 1, "train"', 'save("ckpt/last"')


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    src = os.path.join(ROOT, 'examples', 'gpt.spmd')
    lines = open(src).read().split('\n')

    # main()'s loop (the file's export fns for hosts repeat the step)
    main_at = lines.index('fn main() {')
    main_end = lines.index('}', main_at)

    def line_of(text):
        found = [i + 1 for i, l in enumerate(lines) if text in l and main_at < i < main_end]
        if len(found) != 1:
            sys.exit('FAIL: %r is on lines %s of main() in %s, not on one' % (text, found, src))
        return found[0]

    r = subprocess.run([sys.argv[1], '--regions', '-D', 'DROPOUT=0.1', src], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit('FAIL: spmdc --regions exited %d:\n%s%s' % (r.returncode, r.stdout, r.stderr))
    regions = [(int(a), int(b)) for a, b in re.findall(r'^  \S*gpt\.spmd:(\d+)-(\d+): region \d+: capturable',
                                                         r.stdout, re.M)]
    step = [line_of(t) for t in STEP]
    covering = [(a, b) for a, b in regions if a <= min(step) and max(step) <= b]
    if not covering:
        sys.exit('FAIL: no capturable region covers the step (lines %s):\n%s' % (step, r.stdout))
    a, b = covering[0]
    inside = [t for t in OUTSIDE if a <= line_of(t) <= b]
    if inside:
        sys.exit('FAIL: the region %d-%d holds %s:\n%s' % (a, b, inside, r.stdout))
    m = re.search(r'gpt\.spmd:%d-%d: region \d+: .*host scalars its kernels read from its slot table '
                  r'\(refreshed before each replay\): (.*); taken by value \(a replay is refused when one differs\): '
                  r'(.*)$' % (a, b), r.stdout, re.M)
    want = ('`1000 * step`', '`step + 1`', '`lr`')
    if not m or m.group(2) != 'none' or any(w not in m.group(1) for w in want):
        sys.exit('FAIL: the step\'s host scalars %s are not all read from the slot table, none by value:\n%s'
                 % (', '.join(want), r.stdout))
    for op in ('wall_time', 'token_batch'):
        if not re.search(r'stops a region: `%s`' % op, r.stdout):
            sys.exit('FAIL: %s is not named as what stops a region:\n%s' % (op, r.stdout))
    print('ok: the step, lines %d-%d, is one capturable region; its host scalars through the slot table: %s' % (a, b, m.group(1)))


if __name__ == '__main__':
    main()
