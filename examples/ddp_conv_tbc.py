"""Scale-out: data-parallel training of emulated ConvTBC layers with torch.distributed (DDP, gloo backend, CPUs).

    python examples/ddp_conv_tbc.py [--world-size 2] [--steps 20] [--threads 1] [--cube torch_npu] [--dump DIR]
                                    [--start-method spawn|fork]

A study or training run that outgrows one process uses torch.distributed, as any PyTorch model does: the model
(two ``pyconvtbc.torch.ConvTBC`` layers, both passes emulated) is wrapped in ``DistributedDataParallel``; each
of ``--world-size`` processes on this machine (``torch.multiprocessing``, spawned unless ``--start-method``
says otherwise; the gloo backend; a free local port) takes its share of every batch, and DDP averages the
gradients with an all-reduce before each optimiser step.  Every process starts from the same weights (seed 0)
and draws the same global batch (seeded by the step).

Threads: each process's emulated kernels use ``--threads`` threads (set through ``$PYCONVTBC_NUM_THREADS`` in
the children's environment; the ``num_threads=`` emulation keyword of ``ConvTBC`` does the same per layer), and
torch's own ops as many (``torch.set_num_threads``), so that N processes on a machine with C cores do not run
N x C threads.  The emulated backward runs with ``deterministic=True``: the same inputs give the same bits.

``--dump DIR`` writes, per rank, ``rank<R>.pt``: the gradients of the first step before the all-reduce (recorded
by a DDP communication hook) and after it, the rank's share of the batch, and the loss of every step.
Needs torch with torch.distributed (pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu).
"""
import argparse
import os
import socket
import sys

import torch
import torch.distributed as dist

from pyconvtbc.torch import ConvTBC

T, BATCH, CIN, HIDDEN, COUT, K = 16, 8, 8, 16, 4, 3


def make_model(cube="torch_npu", seed=0, **emulation):
    """Two emulated ConvTBC layers with a ReLU between them; the weights depend on ``seed`` only."""
    torch.manual_seed(seed)
    kw = dict(cube_math_type=cube, deterministic=True, **emulation)
    return torch.nn.Sequential(ConvTBC(CIN, HIDDEN, K, padding=K // 2, **kw), torch.nn.ReLU(),
                               ConvTBC(HIDDEN, COUT, K, padding=K // 2, **kw))


def make_batch(step, batch=BATCH, seed=0):
    """The global batch of ``step``: inputs (T, batch, CIN) and regression targets (T, batch, COUT)."""
    g = torch.Generator().manual_seed(seed * 100003 + step)
    return torch.randn(T, batch, CIN, generator=g), torch.randn(T, batch, COUT, generator=g)


def shard(t, rank, world):
    """Rank ``rank``'s contiguous share of the batch axis (axis 1, TBC layout)."""
    n = t.shape[1] // world
    return t[:, rank * n:(rank + 1) * n]


def loss_fn(out, target):
    return torch.nn.functional.mse_loss(out, target)


def recording_allreduce(state, bucket):
    """A DDP communication hook: keeps a copy of this rank's gradients (before the all-reduce) in
    ``state["local"]``, then runs DDP's default hook (each gradient divided by the world size, then summed over
    the ranks)."""
    from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook
    for p, g in zip(bucket.parameters(), bucket.gradients()):
        state["local"][id(p)] = g.detach().clone()
    return allreduce_hook(None, bucket)


def worker(rank, world, port, args):
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        torch.set_num_threads(args.threads)
        net = make_model(args.cube)
        model = torch.nn.parallel.DistributedDataParallel(net)
        recorded = {"local": {}}
        if args.dump:
            model.register_comm_hook(recorded, recording_allreduce)
        opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
        losses, first = [], None
        for step in range(args.steps):
            x, y = make_batch(step, args.batch)
            xs, ys = shard(x, rank, world), shard(y, rank, world)
            opt.zero_grad()
            loss = loss_fn(model(xs), ys)
            loss.backward()                      # DDP all-reduces (averages) the gradients here
            if step == 0 and args.dump:
                names = dict(net.named_parameters())
                first = {"local": {n: recorded["local"][id(p)] for n, p in names.items()},
                         "averaged": {n: p.grad.detach().clone() for n, p in names.items()},
                         "x": xs.clone(), "y": ys.clone()}
            opt.step()
            mean = loss.detach().clone()
            dist.all_reduce(mean)                # the global batch's loss, for the printout
            losses.append(float(mean) / world)
        if args.dump:
            os.makedirs(args.dump, exist_ok=True)
            torch.save({"rank": rank, "world": world, "first_step": first, "losses": losses,
                        "threads_env": os.environ.get("PYCONVTBC_NUM_THREADS"),
                        "torch_threads": torch.get_num_threads()},
                       os.path.join(args.dump, f"rank{rank}.pt"))
        if rank == 0:
            for i in range(0, len(losses), max(1, len(losses) // 10)):
                print(f"step {i + 1:4d}  loss {losses[i]:.6f}")
            print(f"step {len(losses):4d}  loss {losses[-1]:.6f}  ({world} processes, gloo, "
                  f"{args.threads} kernel thread(s) each, cube_math_type={args.cube})")
    finally:
        dist.destroy_process_group()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--world-size", type=int, default=2, help="processes (default 2)")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--batch", type=int, default=BATCH, help=f"global batch, split over the processes "
                    f"(default {BATCH})")
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--threads", type=int, default=1, help="kernel and torch threads per process (default 1)")
    ap.add_argument("--cube", default="torch_npu", help="cube_math_type of both layers (default torch_npu)")
    ap.add_argument("--dump", metavar="DIR", help="write rank<R>.pt with the first step's gradients")
    ap.add_argument("--start-method", default="spawn", choices=("spawn", "fork", "forkserver"),
                    help="how the processes start (default spawn, the portable one; fork skips re-importing torch "
                         "in each, where the platform has it)")
    a = ap.parse_args(argv)
    if a.world_size < 1 or a.steps < 1 or a.threads < 1 or a.batch < a.world_size or a.batch % a.world_size:
        ap.error(f"--world-size {a.world_size}, --steps {a.steps}, --threads {a.threads}, --batch {a.batch}: "
                 "expected positive integers with the batch a multiple of the world size")
    if not (dist.is_available() and dist.is_gloo_available()):
        print("torch.distributed with the gloo backend is not available in this torch build", file=sys.stderr)
        return 1
    # the children inherit this environment: their emulated kernels use a.threads threads each
    os.environ["PYCONVTBC_NUM_THREADS"] = str(a.threads)
    torch.multiprocessing.start_processes(worker, args=(a.world_size, free_port(), a), nprocs=a.world_size,
                                          join=True, start_method=a.start_method)
    return 0


if __name__ == "__main__":
    sys.exit(main())
