#!/usr/bin/env python3
"""compare.py's own tests: each class passes what it should and fails what
it should (a flipped bit, a relative error above the tolerance, a shape, a
missing file, NaN in one only), losses and --same likewise."""
import os
import struct
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import compare  # noqa: E402


def npy(path, values, descr="<f4", shape=None):
    shape = shape if shape is not None else (len(values),)
    header = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (
        descr, "(%d,)" % shape[0] if len(shape) == 1 else str(tuple(shape)))
    header += " " * (63 - (10 + len(header)) % 64) + "\n"
    fmt = compare.FMT[descr]
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode())
        f.write(struct.pack("<%d%s" % (len(values), fmt), *values))


def run(*args):
    p = subprocess.run([sys.executable, os.path.join(HERE, "compare.py")] + list(args),
                       capture_output=True, text=True)
    return p.returncode, p.stdout


def check(cond, what):
    if not cond:
        print("FAIL:", what)
        sys.exit(1)


with tempfile.TemporaryDirectory() as t:
    ref, out = os.path.join(t, "ref"), os.path.join(t, "out")
    os.mkdir(ref)
    os.mkdir(out)
    cases = {  # name: (class, ref values, out values, passes)
        "same_bits": ("bits", [1.0, 2.5, -3.0], [1.0, 2.5, -3.0], True),
        "flipped_bit": ("bits", [1.0, 2.5, -3.0], [1.0, 2.5000002, -3.0], False),
        "neg_zero": ("bits", [0.0], [-0.0], False),
        "close": ("f32", [1.0, 2.0, 3.0], [1.0, 2.0 + 1e-6, 3.0], True),
        "far": ("f32", [1.0, 2.0, 3.0], [1.0, 2.001, 3.0], False),
        "nan_both": ("f32", [float("nan"), 1.0], [float("nan"), 1.0], True),
        "nan_one": ("f32", [float("nan"), 1.0], [0.0, 1.0], False),
        "bf16_ok": ("bf16", [1.0, 2.0], [1.0, 2.01], True),
        "bf16_far": ("bf16", [1.0, 2.0], [1.0, 2.2], False),
    }
    for name, (cls, r, o, _) in cases.items():
        npy("%s/%s.npy" % (ref, name), r)
        npy("%s/%s.npy" % (out, name), o)
    npy(ref + "/shape.npy", [1, 2, 3, 4], shape=(2, 2))
    npy(out + "/shape.npy", [1, 2, 3, 4], shape=(4,))
    npy(ref + "/missing.npy", [1.0])
    with open(ref + "/manifest.txt", "w") as f:
        for name, (cls, *_rest) in cases.items():
            f.write("%s %s\n" % (name, cls))
        f.write("shape bits\nmissing bits\n")
    rc, text = run(ref, out)
    for name, (cls, _r, _o, ok) in cases.items():
        check(("FAIL %s " % name in text) != ok, "%s (%s) should %s:\n%s" %
              (name, cls, "pass" if ok else "fail", text))
    check("FAIL shape " in text and "FAIL missing" in text, "shape and missing file:\n" + text)
    check(text.strip().endswith("4 passed, 7 failed") and rc == 1, "summary:\n" + text)

    rc, text = run("--identical", ref, ref)
    check(rc == 0 and "11 passed, 0 failed" in text, "--identical of a directory with itself:\n" + text)
    rc, text = run("--identical", ref, out)
    check(rc == 1 and "FAIL close (bits)" in text, "--identical: a close f32 result is not identical:\n" + text)
    with open(out + "/manifest.txt", "w") as f:
        f.write("same_bits x\nclose x\n")
    rc, text = run("--subset", ref, out)
    check(rc == 0 and "2 passed, 0 failed" in text, "--subset takes the reference's classes:\n" + text)

    a, b, c = (os.path.join(t, n) for n in ("a.txt", "b.txt", "c.txt"))
    open(a, "w").write("step 0 loss 5.5450\nstep 1 loss 5.1234 val_loss 5.2\n")
    open(b, "w").write("step 0 loss 5.5452\nstep 1 loss 5.1234 val_loss 5.2\n")
    open(c, "w").write("step 0 loss 5.5450\nstep 1 loss 5.2 val_loss 5.2\n")
    rc, text = run("--losses", a, b)
    check(rc == 0 and "3 passed, 0 failed" in text, "losses within 1e-4:\n" + text)
    rc, text = run("--losses", a, c)
    check(rc == 1 and "FAIL loss 1" in text, "a loss off by 1.5%:\n" + text)
    open(c, "w").write("step 0 loss nan\n")
    rc, text = run("--losses", c, c)
    check(rc == 1 and "0 passed, 1 failed" in text, "a NaN loss matches nothing, not even NaN:\n" + text)
    empty = os.path.join(t, "empty")
    os.mkdir(empty)
    open(empty + "/manifest.txt", "w").close()
    for args in ((empty, empty), ("--identical", empty, empty), ("--subset", ref, empty)):
        rc, text = run(*args)
        check(rc == 1 and "0 passed, 1 failed" in text, "an empty manifest is not a pass (%s):\n%s" % (args, text))
    rc, text = run("--same", a, a)
    check(rc == 0, "--same on one file")
    rc, text = run("--same", a, b)
    check(rc == 1 and "1 failed" in text, "--same on different files:\n" + text)
print("compare.py: all cases as expected")
