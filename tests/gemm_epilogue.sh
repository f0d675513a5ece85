#!/bin/sh
# gemm_epilogue.sh SPMDC FILE: the bf16 GEMM epilogue fusion happens where it
# should. FILE is tests/e2e/bf16_gemm_epilogue.spmd: its forward-only code
# has three fused GEMMs (bias + gelu, relu, bias); the differentiated
# forward of `layer` keeps the matmul's result and has none.
set -eu
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$1" -S "$2" -o "$work/p.c"
n=$(grep -c 'rt_matmul_bias_act(ctx' "$work/p.c" || true)
want='rt_matmul_bias_act(ctx, [a-z_0-9]*, [a-z_0-9]*, b_[0-9]*, RT_GELU)'
grep -q "$want" "$work/p.c" || { echo "FAIL: no fused matmul + bias + gelu"; exit 1; }
# layer (called twice from main: once plain, once as layer_fwd) -> 1 fused in
# the plain instance; main's relu and bias: 2 more
[ "$n" -eq 3 ] || { echo "FAIL: $n fused GEMMs, expected 3"; grep -n 'rt_matmul' "$work/p.c"; exit 1; }
grep -q '^static void f_layer.*_fwd.*{$' "$work/p.c" || { echo "FAIL: no differentiated forward of layer"; exit 1; }
awk '/^static void f_layer.*_fwd.*{$/,/^}/' "$work/p.c" | grep -q 'rt_matmul_bias_act' &&
    { echo "FAIL: the differentiated forward was fused"; exit 1; }
echo "ok: 3 fused GEMMs, none in the differentiated forward"
