#!/usr/bin/env python3
"""Records are lowered away (SPEC 13): the C generated for a program that
trains a parameter record has no record in it.  Each record parameter,
result and variable is its leaf tensors, named after their field paths
(m_blocks_w1), and a generic fn's host-number parameter is a C number.

usage: codegen_records.py SPMDC PROGRAM.spmd"""
import re
import subprocess
import sys

CHECKS = [
    ("a record parameter is its fields, in declaration order, named by path",
     r"static void f_adamw_0\(rt_ctx \*ctx, rt_tensor \*p_blocks_g_\d+, rt_tensor \*p_blocks_w1_\d+, "
     r"rt_tensor \*p_blocks_w2_\d+, rt_tensor \*p_head_\d+, rt_tensor \*g_blocks_g_\d+"),
    ("a generic parameter given a host integer is a C integer", r"rt_tensor \*v_head_\d+, int64_t step_\d+"),
    ("r[i] of a record passes one layer's fields", r"static void f_block_0_fwd\w*\(rt_ctx \*ctx, tape_t \*tape, "
     r"rt_tensor \*x_\d+, rt_tensor \*p_g_\d+, rt_tensor \*p_w1_\d+, rt_tensor \*p_w2_\d+"),
    ("a record var is one C variable per field", r"rt_tensor \*var_m_blocks_w1_\d+ = NULL;"),
    ("a record's gradient is one tensor per field", r"f_loss_0_vjp\w*\(ctx, x_\d+, t_\d+, m_blocks_g_\d+, "
     r"m_blocks_w1_\d+, m_blocks_w2_\d+, m_head_\d+, &l_\d+, &g_blocks_g_\d+, &g_blocks_w1_\d+"),
]


def main():
    spmdc, prog = sys.argv[1], sys.argv[2]
    proc = subprocess.run([spmdc, "-S", prog, "-o", "-"], capture_output=True, text=True)
    if proc.returncode != 0:
        print(proc.stderr)
        print("FAIL: spmdc -S exited", proc.returncode)
        return 1
    c = proc.stdout
    fails = 0
    for what, pattern in CHECKS:
        if not re.search(pattern, c):
            print(f"FAIL: {what}: no match for {pattern}")
            fails += 1
    names = re.findall(r"\b(Model|Blocks)\b", c)
    if names:
        print(f"FAIL: the C names a struct: {sorted(set(names))}")
        fails += 1
    print(f"{len(CHECKS) + 1 - fails} passed, {fails} failed")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
