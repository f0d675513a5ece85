#!/usr/bin/env python3
"""Compares a target's results with the CPU target's (SPEC 14's tolerances).

  compare.py REF_DIR OUT_DIR
      every NAME.npy listed in REF_DIR/manifest.txt ("NAME CLASS" lines):
      bits  the same dtype, shape and bytes
      f32   normwise ||out - ref|| / ||ref|| <= 1e-5 (NaN and inf where the
            reference has them)
      bf16  the same with 1e-2
  compare.py --losses REF.txt OUT.txt [--rel R]
      the numbers after "loss" in each file (the training log's lines), the
      same count, each within R relative (default 1e-4)
  compare.py --subset REF_DIR OUT_DIR
      as above for the results OUT_DIR's manifest lists (a run of some
      sections), with the classes of REF_DIR's
  compare.py --identical DIR1 DIR2
      every result of DIR1's manifest has the same bytes in DIR2 (a rerun)
  compare.py --same A B
      the two files' bytes are identical

Prints one line per failure and ends with "N passed, M failed"; exit status
1 when anything failed. Pure Python (no numpy): the GPU machines have none.
"""
import ast
import math
import re
import struct
import sys

TOL = {"f32": 1e-5, "bf16": 1e-2}
FMT = {"<f4": "f", "<f8": "d", "<i4": "i"}


def read_npy(path):
    with open(path, "rb") as f:
        data = f.read()
    if data[:6] != b"\x93NUMPY":
        raise ValueError("not a .npy file")
    major = data[6]
    if major == 1:
        (hlen,) = struct.unpack("<H", data[8:10])
        start = 10
    else:
        (hlen,) = struct.unpack("<I", data[8:12])
        start = 12
    header = ast.literal_eval(data[start:start + hlen].decode("latin1"))
    descr, shape = header["descr"], tuple(header["shape"])
    if header.get("fortran_order"):
        raise ValueError("fortran order")
    if descr not in FMT:
        raise ValueError("dtype %s" % descr)
    n = 1
    for s in shape:
        n *= s
    body = data[start + hlen:]
    size = struct.calcsize("<" + FMT[descr])
    if len(body) != n * size:
        raise ValueError("%d data bytes for %d elements" % (len(body), n))
    values = struct.unpack("<%d%s" % (n, FMT[descr]), body)
    return descr, shape, body, values


def normwise(ref, out):
    """||out - ref|| / ||ref||, or a reason it is not comparable"""
    num = den = 0.0
    for r, o in zip(ref, out):
        if math.isnan(r) or math.isnan(o):
            if not (math.isnan(r) and math.isnan(o)):
                return None, "NaN in one only"
            continue
        if math.isinf(r) or math.isinf(o):
            if r != o:
                return None, "inf differs"
            continue
        num += (o - r) ** 2
        den += r * r
    if den == 0.0:
        return (0.0 if num == 0.0 else math.inf), None
    return math.sqrt(num / den), None


def manifest(d):
    with open(d + "/manifest.txt") as f:
        return [line.split() for line in f if line.strip()]


def compare_dirs(ref_dir, out_dir, subset=False, identical=False):
    passed = failed = 0
    entries = manifest(ref_dir)
    if subset:
        cls_of = dict(entries)
        entries = [(n, cls_of.get(n, "unknown")) for n, _ in manifest(out_dir)]
    if identical:
        entries = [(n, "bits") for n, _ in entries]
    if not entries:  # nothing compared is not a pass
        print("FAIL %s: the manifest lists no results" % (out_dir if subset else ref_dir))
        return passed, failed + 1
    for name, cls in entries:
        try:
            rd, rs, rb, rv = read_npy("%s/%s.npy" % (ref_dir, name))
            od, os_, ob, ov = read_npy("%s/%s.npy" % (out_dir, name))
        except (OSError, ValueError) as e:
            print("FAIL %s: %s" % (name, e))
            failed += 1
            continue
        why = None
        if (rd, rs) != (od, os_):
            why = "dtype/shape %s %s, expected %s %s" % (od, os_, rd, rs)
        elif cls == "bits":
            if rb != ob:
                k = next(i for i in range(len(rv)) if struct.pack("<" + FMT[rd], rv[i]) != struct.pack("<" + FMT[rd], ov[i]))
                why = "not the same bits: element %d is %r, expected %r" % (k, ov[k], rv[k])
        elif cls in TOL:
            err, reason = normwise(rv, ov)
            if reason:
                why = reason
            elif err > TOL[cls]:
                why = "normwise relative difference %.3g > %g" % (err, TOL[cls])
        else:
            why = "unknown class %r" % cls
        if why:
            print("FAIL %s (%s): %s" % (name, cls, why))
            failed += 1
        else:
            passed += 1
    return passed, failed


NUM = re.compile(r"loss[^0-9+\-naNinf]*([-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|nan|inf))")


def losses(path):
    with open(path) as f:
        return [float(m.group(1)) for line in f for m in NUM.finditer(line)]


def compare_losses(ref, out, rel):
    a, b = losses(ref), losses(out)
    if not a:
        print("FAIL %s: no losses" % ref)
        return 0, 1
    if len(a) != len(b):
        print("FAIL %s: %d losses, expected %d" % (out, len(b), len(a)))
        return 0, 1
    passed = failed = 0
    for i, (r, o) in enumerate(zip(a, b)):
        if abs(o - r) <= rel * abs(r):  # (a NaN loss matches nothing, not even NaN)
            passed += 1
        else:
            print("FAIL loss %d: %.9g, expected %.9g (relative %.3g > %g)" %
                  (i, o, r, abs(o - r) / abs(r) if r else math.inf, rel))
            failed += 1
    return passed, failed


def main(argv):
    if len(argv) >= 3 and argv[0] == "--losses":
        rel = float(argv[argv.index("--rel") + 1]) if "--rel" in argv else 1e-4
        p, f = compare_losses(argv[1], argv[2], rel)
    elif len(argv) == 3 and argv[0] in ("--subset", "--identical"):
        p, f = compare_dirs(argv[1], argv[2], subset=argv[0] == "--subset",
                            identical=argv[0] == "--identical")
    elif len(argv) == 3 and argv[0] == "--same":
        with open(argv[1], "rb") as x, open(argv[2], "rb") as y:
            same = x.read() == y.read()
        if not same:
            print("FAIL %s and %s differ" % (argv[1], argv[2]))
        p, f = (1, 0) if same else (0, 1)
    elif len(argv) == 2:
        p, f = compare_dirs(argv[0], argv[1])
    else:
        print(__doc__, file=sys.stderr)
        return 2
    print("%d passed, %d failed" % (p, f))
    return 1 if f else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
