"""tp_mlp_torch.py: examples/mlp_tp.spmd and examples/mlp_tp_bf16.spmd in
PyTorch (Debian python3-torch), for bench/tp_mlp_bf16.sh.

    mpirun -np N /usr/bin/python3 bench/tp_mlp_torch.py --dtype f32|bf16 --dp DP --tp TP \
        [--B 256 --D 1024 --H 4096 --steps 20 --lr 0.05]

The same model and data layout as the .spmd programs: the batch split over
dp, W1 column-parallel and W2 row-parallel over tp (Megatron), the tp
all-reduce of the row-parallel output in the forward (identity backward),
gradients all-reduced over dp, SGD. --dtype bf16 keeps f32 parameters and
computes in bf16 as the .spmd does (x and the weights cast to bf16, gelu on
bf16, the loss in f32); the tp all-reduce moves f32, because gloo in
PyTorch 1.13 has no bf16 reduction ("Invalid scalar type"): PyTorch sends
twice the bytes of the generated program there. Data are random normal
(torch's generator: the values differ from spmdc's Philox, the work does
not). Collectives use gloo over loopback; one intra-op thread per rank.
Rank 0 prints each step's loss and, at the end,
`step_ms median MIN MAX` over the timed steps (the first two are warm-up)."""
import argparse
import os
import statistics
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F


def main():
    p = argparse.ArgumentParser()
    p.add_argument('--dtype', choices=['f32', 'bf16'], default='f32')
    p.add_argument('--dp', type=int, default=1)
    p.add_argument('--tp', type=int, default=1)
    p.add_argument('--B', type=int, default=256)
    p.add_argument('--D', type=int, default=1024)
    p.add_argument('--H', type=int, default=4096)
    p.add_argument('--steps', type=int, default=20)
    p.add_argument('--lr', type=float, default=0.05)
    a = p.parse_args()
    torch.set_num_threads(1)
    rank = int(os.environ.get('OMPI_COMM_WORLD_RANK', '0'))
    world = int(os.environ.get('OMPI_COMM_WORLD_SIZE', '1'))
    assert world == a.dp * a.tp, 'mpirun -np must be dp*tp'
    os.environ.setdefault('MASTER_ADDR', '127.0.0.1')
    os.environ.setdefault('MASTER_PORT', '29517')
    dist.init_process_group('gloo', rank=rank, world_size=world)
    # row-major (dp, tp) layout, as spmdc's mesh
    i_dp, i_tp = rank // a.tp, rank % a.tp
    tp_groups = [dist.new_group([d * a.tp + t for t in range(a.tp)]) for d in range(a.dp)]
    dp_groups = [dist.new_group([d * a.tp + t for d in range(a.dp)]) for t in range(a.tp)]
    tp_group, dp_group = tp_groups[i_dp], dp_groups[i_tp]
    B, D, H = a.B // a.dp, a.D, a.H // a.tp
    g = torch.Generator().manual_seed(1 + i_dp)
    x = torch.randn(B, D, generator=g)
    t = torch.tanh(torch.randn(B, D, generator=g))
    gw = torch.Generator().manual_seed(3 + i_tp)
    w1 = (torch.randn(D, H, generator=gw) * 0.1).requires_grad_()
    w2 = (torch.randn(H, D, generator=gw) * 0.1).requires_grad_()
    bf16 = a.dtype == 'bf16'
    xc = x.bfloat16() if bf16 else x

    class AllReduceTP(torch.autograd.Function):
        @staticmethod
        def forward(ctx, y):
            if a.tp == 1:
                return y.clone()
            if y.dtype == torch.bfloat16:  # gloo (1.13) cannot reduce bf16: sum in f32
                z = y.float()
                dist.all_reduce(z, group=tp_group)
                return z.bfloat16()
            y = y.clone()
            dist.all_reduce(y, group=tp_group)
            return y

        @staticmethod
        def backward(ctx, dy):
            return dy

    times = []
    for step in range(a.steps):
        t0 = time.perf_counter()
        if bf16:
            h = F.gelu(xc @ w1.bfloat16())
            y = AllReduceTP.apply(h @ w2.bfloat16()).float()
        else:
            h = F.gelu(xc @ w1)
            y = AllReduceTP.apply(h @ w2)
        loss = ((y - t) ** 2).sum() / (a.B * a.D)
        w1.grad = w2.grad = None
        loss.backward()
        with torch.no_grad():
            for w in (w1, w2):
                if a.dp > 1:
                    dist.all_reduce(w.grad, group=dp_group)
                w -= a.lr * w.grad
        times.append((time.perf_counter() - t0) * 1e3)
        lv = loss.detach().clone()
        if a.dp > 1:
            dist.all_reduce(lv, group=dp_group)
        if rank == 0:
            print('step', step, 'loss', float(lv))
    timed = times[2:] if len(times) > 2 else times
    if rank == 0:
        print('step_ms %.3f %.3f %.3f' % (statistics.median(timed), min(timed), max(timed)))
    dist.destroy_process_group()


if __name__ == '__main__':
    main()
