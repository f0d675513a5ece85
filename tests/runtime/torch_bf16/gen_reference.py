"""gen_reference.py: writes reference.txt, PyTorch's bf16 results on CPU for
a few ops, which test_bf16.c (bf16/matches_pytorch) compares with
libspmdrt's.  Run once with Debian's python3-torch (1.13):

    /usr/bin/python3 tests/runtime/torch_bf16/gen_reference.py > tests/runtime/torch_bf16/reference.txt

Each tensor is one line: `NAME DTYPE NDIM DIMS... : VALUES...`, bf16 values
as their 16 bits in hex, f32 ones as their 32 bits in hex, i32 in decimal.

PyTorch 1.13 (this Debian build: AVX2 kernels, no bf16 GEMM) computes a few
bf16 ops with bf16 intermediates: silu, gelu(approximate='tanh') and
layer_norm round inside the formula, and its bf16 matmul accumulates partly
in bf16.  Newer PyTorch computes them in f32 ("opmath") and rounds once,
which is what the SPEC asks; for those ops NAME_f32 is PyTorch's f32 result
rounded once to bf16, and the test compares with that (NAME, the 1.13
result, is kept for the record)."""
import torch
import torch.nn.functional as F

torch.manual_seed(1234)


def bits16(t):
    return [format(v & 0xFFFF, '04x') for v in t.contiguous().view(torch.int16).flatten().tolist()]


def bits32(t):
    return [format(v & 0xFFFFFFFF, '08x') for v in t.contiguous().view(torch.int32).flatten().tolist()]


def emit(name, t):
    if t.dtype == torch.bfloat16:
        vals, dt = bits16(t), 'bf16'
    elif t.dtype == torch.float32:
        vals, dt = bits32(t), 'f32'
    else:
        vals, dt = [str(v) for v in t.flatten().tolist()], 'i32'
    print(name, dt, t.dim(), *t.shape, ':', *vals)


def bf(*shape, lo=-3.0, hi=3.0):
    return (torch.rand(*shape) * (hi - lo) + lo).to(torch.bfloat16)


x = bf(64)
xp = bf(64, lo=0.05, hi=4.0)
dy = bf(64, lo=-1.0, hi=1.0)
emit('x', x)
emit('xp', xp)
emit('dy', dy)
for name, f in [('gelu', F.gelu), ('gelu_tanh', lambda v: F.gelu(v, approximate='tanh')),
                ('exp', torch.exp), ('tanh', torch.tanh), ('sigmoid', torch.sigmoid),
                ('silu', F.silu), ('sin', torch.sin), ('square', torch.square), ('relu', torch.relu)]:
    emit(name, f(x))
for name, f in [('log', torch.log), ('sqrt', torch.sqrt), ('rsqrt', torch.rsqrt)]:
    emit(name, f(xp))
emit('gelu_bwd', torch.ops.aten.gelu_backward(dy, x))
emit('silu_f32', F.silu(x.float()).bfloat16())
emit('gelu_tanh_f32', F.gelu(x.float(), approximate='tanh').bfloat16())
emit('mul_scalar', x * 0.1)
emit('add_scalar', x + 0.3)

a = bf(4, 16)
b = bf(16, lo=0.5, hi=2.0)
emit('a', a)
emit('b', b)
emit('add', a + b)
emit('sub', a - b)
emit('mul', a * b)
emit('div', a / b)

# f32 -> bf16: random values, ties, NaN, infinities, overflow, subnormals
f = torch.cat([torch.randn(60) * 10,
               torch.tensor([1.0 + 2.0**-8, 1.0 + 3 * 2.0**-8, float('nan'), float('inf'), -float('inf'),
                             3.4e38, 1e-40, -0.0])]).to(torch.float32)
emit('f32', f)
emit('f32_to_bf16', f.to(torch.bfloat16))

s = bf(4, 16)
emit('s', s)
emit('softmax', F.softmax(s, dim=1))
emit('log_softmax', F.log_softmax(s, dim=1))
emit('sum', s.sum(dim=1))
emit('mean', s.mean(dim=1))
w = bf(16, lo=0.5, hi=1.5)
bias = bf(16, lo=-0.5, hi=0.5)
emit('ln_w', w)
emit('ln_b', bias)
emit('layer_norm', F.layer_norm(s, (16,), w, bias, eps=1e-5))
emit('layer_norm_f32', F.layer_norm(s.float(), (16,), w.float(), bias.float(), eps=1e-5).bfloat16())
emit('log_softmax_f32', F.log_softmax(s.float(), dim=1).bfloat16())

ma = bf(8, 32, lo=-1.0, hi=1.0)
mb = bf(32, 16, lo=-1.0, hi=1.0)
emit('ma', ma)
emit('mb', mb)
emit('matmul', ma @ mb)
emit('matmul_f32', (ma.float() @ mb.float()).bfloat16())

tg = torch.randint(0, 16, (4,), dtype=torch.int32)
emit('targets', tg)
emit('cross_entropy', F.cross_entropy(s, tg.long()))
