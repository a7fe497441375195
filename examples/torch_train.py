#!/usr/bin/python3
"""A small decoder-only transformer language model trained data-parallel over MPI (mpi4py), the
way PyTorch users hand their gradients to MPI: run it unchanged with and without libhier
preloaded (LD_PRELOAD=libhier.so) and compare.

  mpiexec -n 8 /usr/bin/python3 examples/torch_train.py --mode ddp [--overlap] [--steps N]

Modes (docs/pytorch.md):
  --mode ddp            gradients fused into buckets of --bucket-mib (25 MiB, as PyTorch DDP and
                        Horovod's fusion buffer), each summed in place with MPI_Allreduce on the
                        tensor's own memory and divided by the number of ranks;
  --mode ddp --overlap  one MPI_Iallreduce per bucket, started from the backward hooks as soon as
                        the bucket's last gradient is accumulated, all waited before the step;
  --mode zero           ZeRO-style sharding: the flat gradient goes through
                        MPI_Reduce_scatter_block, each rank runs AdamW on its shard only (its
                        optimizer state is a shard too), and the updated shards are put together
                        with MPI_Allgather.

Byte-level model trained with AdamW on the license texts of Debian's base-files
(/usr/share/common-licenses, installed everywhere). Seeded and deterministic: every rank starts
from rank 0's parameters (MPI_Bcast) and draws its batches from a generator seeded by
(--seed, step, rank), so two runs with the same reductions print the same losses to the last bit.
torch.set_num_threads(1): one process per rank.

Per step (rank 0, every --print-every steps):
  step S/N loss L step_ms T comm_ms C
loss: the mean over the ranks of their training-batch losses (one extra MPI_Allreduce of one
double, not counted in comm_ms); comm_ms: wall time inside the gradient collectives (ddp: the
Allreduces; overlap: the Iallreduce calls plus the final Waitall; zero: Reduce_scatter_block plus
Allgather). At the end one line with train_mlp's keys:
  final_loss=<mean loss of the last 20 steps> mean_step_ms= mean_comm_ms= ranks= mode= ...
mean_step_ms / mean_comm_ms: means over steps 2..N on rank 0 (step 1 sets up the connections).
mean_arrival_wait_ms: the part of mean_comm_ms that rank 0 waited for the slowest rank to finish
its backward (the slowest rank's time to the gradients' communication minus rank 0's; zero: the
reduce-scatter's only), as train_mlp's: no collective algorithm can remove it.
"""
import argparse
import glob
import json
import math
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from mpi4py import MPI


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mode", choices=("ddp", "zero"), default="ddp")
    ap.add_argument("--overlap", action="store_true", help="ddp: Iallreduce per bucket from backward hooks")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--dim", type=int, default=192, help="model width")
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--ctx", type=int, default=32, help="context length (bytes)")
    ap.add_argument("--batch", type=int, default=2, help="sequences per rank and step")
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--weight-decay", type=float, default=0.01)
    ap.add_argument("--warmup", type=int, default=20, help="linear learning-rate warm-up steps")
    ap.add_argument("--bucket-mib", type=float, default=25.0, help="ddp bucket size (MiB)")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--device", default="cpu", help="cpu or cuda (mpi4py gets the device tensors)")
    ap.add_argument("--print-every", type=int, default=1, help="0: only the final line")
    ap.add_argument("--loss-file", help="rank 0 writes the per-step loss, step_ms, comm_ms here (JSON)")
    ap.add_argument("--done", help="touch this file after the final line (tools/minicluster --done-file)")
    return ap.parse_args(argv)


# ---------------------------------------------------------------------------------------- data
LICENSES = "/usr/share/common-licenses"


def load_text():
    """The license texts, each once (several names are links to the same text), sorted by name."""
    seen, parts = set(), []
    for path in sorted(glob.glob(os.path.join(LICENSES, "*"))):
        real = os.path.realpath(path)
        if real in seen or not os.path.isfile(real):
            continue
        seen.add(real)
        with open(real, "rb") as f:
            parts.append(f.read())
    data = b"\n".join(parts)
    if len(data) < 100000:
        sys.exit(f"torch_train: only {len(data)} bytes of text under {LICENSES} (package base-files)")
    return torch.frombuffer(bytearray(data), dtype=torch.uint8).to(torch.long)


def batch(data, step, rank, args):
    g = torch.Generator().manual_seed(args.seed * 1000003 + step * 4099 + rank)
    starts = torch.randint(0, data.numel() - args.ctx - 1, (args.batch,), generator=g)
    x = torch.stack([data[s:s + args.ctx] for s in starts.tolist()])
    y = torch.stack([data[s + 1:s + args.ctx + 1] for s in starts.tolist()])
    return x, y


# --------------------------------------------------------------------------------------- model
class Block(nn.Module):
    def __init__(self, dim, heads, ctx):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.ln2 = nn.LayerNorm(dim)
        self.fc = nn.Linear(dim, 4 * dim)
        self.out = nn.Linear(4 * dim, dim)
        self.register_buffer("mask", torch.full((ctx, ctx), float("-inf")).triu(1), persistent=False)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(d // self.heads) + self.mask[:t, :t]
        y = (att.softmax(dim=-1) @ v).transpose(1, 2).reshape(b, t, d)
        x = x + self.proj(y)
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class LM(nn.Module):
    def __init__(self, args):
        super().__init__()
        self.tok = nn.Embedding(256, args.dim)
        self.pos = nn.Embedding(args.ctx, args.dim)
        self.blocks = nn.ModuleList(Block(args.dim, args.heads, args.ctx) for _ in range(args.layers))
        self.ln = nn.LayerNorm(args.dim)
        self.head = nn.Linear(args.dim, 256, bias=False)
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, std=0.02)
                if getattr(m, "bias", None) is not None:
                    nn.init.zeros_(m.bias)

    def forward(self, x, y):
        h = self.tok(x) + self.pos(torch.arange(x.shape[1], device=x.device))
        for blk in self.blocks:
            h = blk(h)
        logits = self.head(self.ln(h))
        return F.cross_entropy(logits.view(-1, 256), y.view(-1))


# ------------------------------------------------------------------------------ MPI on tensors
def mpibuf(t):
    """The tensor's own memory as an mpi4py buffer (no copy): a NumPy view on the host, the tensor
    itself on a device (mpi4py reads DLPack / __cuda_array_interface__)."""
    assert t.is_contiguous() and t.dtype == torch.float32
    return [t.numpy() if t.device.type == "cpu" else t, MPI.FLOAT]


def flat_views(params, flat):
    """Make each parameter's data and gradient views into one flat buffer each (params in the
    given order); returns the flat gradient. Backward then accumulates straight into it."""
    grad = torch.zeros_like(flat)
    off = 0
    for p in params:
        n = p.numel()
        flat[off:off + n].copy_(p.data.view(-1))
        p.data = flat[off:off + n].view_as(p)
        p.grad = grad[off:off + n].view_as(p)
        off += n
    return grad


def check_views(params, grad):
    """Backward accumulates in place into an existing .grad: stop if it ever replaced one."""
    lo, hi = grad.data_ptr(), grad.data_ptr() + grad.numel() * 4
    for p in params:
        if not lo <= p.grad.data_ptr() < hi:
            sys.exit("torch_train: a gradient left its bucket (PyTorch replaced .grad)")


class Buckets:
    """ddp: parameters in reverse registration order (roughly the order backward produces their
    gradients), cut into buckets of at most `cap` bytes; each bucket one flat parameter buffer and
    one flat gradient buffer."""

    def __init__(self, params, cap, comm, overlap, dev):
        self.comm, self.size = comm, comm.Get_size()
        self.buckets, cur, cur_bytes = [], [], 0
        for p in reversed(params):
            if cur and cur_bytes + p.numel() * 4 > cap:
                self.buckets.append(cur)
                cur, cur_bytes = [], 0
            cur.append(p)
            cur_bytes += p.numel() * 4
        if cur:
            self.buckets.append(cur)
        self.flats, self.grads, self.reqs, self.pending = [], [], [], []
        self.comm_s = 0.0
        for b in self.buckets:
            flat = torch.zeros(sum(p.numel() for p in b), device=dev)
            self.flats.append(flat)
            self.grads.append(flat_views(b, flat))
        if overlap:
            self._hooks = []
            for i, b in enumerate(self.buckets):
                for p in b:
                    # The gradient accumulator's hook runs once p.grad holds this step's gradient.
                    acc = p.expand_as(p).grad_fn.next_functions[0][0]
                    acc.register_hook(self._ready_hook(i))
                    self._hooks.append(acc)  # keep the accumulators alive

    def _ready_hook(self, i):
        def hook(*_):
            self.pending[i] -= 1
            if self.pending[i] == 0:  # the bucket is complete: send it now, backward goes on
                t0 = time.perf_counter()
                self.reqs.append(self.comm.Iallreduce(MPI.IN_PLACE, mpibuf(self.grads[i])))
                self.comm_s += time.perf_counter() - t0
        return hook

    def zero(self):
        for g in self.grads:
            g.zero_()
        self.pending = [len(b) for b in self.buckets]
        self.reqs = []
        self.comm_s = 0.0

    def reduce(self, overlap):
        """Sum every bucket over the ranks and average; returns the seconds spent inside MPI."""
        t0 = time.perf_counter()
        if overlap:
            if len(self.reqs) != len(self.buckets):
                sys.exit("torch_train: a bucket never completed during backward")
            MPI.Request.Waitall(self.reqs)
        else:
            for g in self.grads:
                self.comm.Allreduce(MPI.IN_PLACE, mpibuf(g))
        spent = self.comm_s + time.perf_counter() - t0
        for g in self.grads:
            g.div_(self.size)
        return spent


# --------------------------------------------------------------------------------------- main
def main(argv=None):
    """Train as the options in argv (default sys.argv) say; returns rank 0's record (loss,
    step_ms, comm_ms per step; the final line) so that a driver can run several modes in one
    MPI job (tests/torch)."""
    args = parse_args(argv)
    torch.set_num_threads(1)
    torch.manual_seed(args.seed)
    torch.use_deterministic_algorithms(True)
    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    dev = torch.device(args.device)
    if args.overlap and args.mode != "ddp":
        sys.exit("torch_train: --overlap goes with --mode ddp")
    if args.dim % args.heads:
        sys.exit("torch_train: --dim must be a multiple of --heads")

    data = load_text()
    model = LM(args).to(dev)
    params = list(model.parameters())
    nparams = sum(p.numel() for p in params)

    if args.mode == "ddp":
        buckets = Buckets(params, int(args.bucket_mib * 1048576), comm, args.overlap, dev)
        for flat in buckets.flats:  # every rank starts from rank 0's parameters
            comm.Bcast(mpibuf(flat), root=0)
        opt = torch.optim.AdamW(params, lr=args.lr, weight_decay=args.weight_decay)
        nbuckets = len(buckets.buckets)
    else:
        padded = -(-nparams // size) * size  # a multiple of the ranks: equal shards
        flat = torch.zeros(padded, device=dev)
        grad = flat_views(params, flat)
        comm.Bcast(mpibuf(flat), root=0)
        shard_n = padded // size
        shard = nn.Parameter(flat[rank * shard_n:(rank + 1) * shard_n].clone())  # my master shard
        shard.grad = torch.zeros_like(shard)
        opt = torch.optim.AdamW([shard], lr=args.lr, weight_decay=args.weight_decay)
        nbuckets = 1
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / max(1, args.warmup)))

    if rank == 0:
        print(f"torch_train: mode={args.mode}{'+overlap' if args.overlap else ''} ranks={size} "
              f"params={nparams} layers={args.layers} dim={args.dim} ctx={args.ctx} batch={args.batch}/rank "
              f"buckets={nbuckets} text={data.numel()} bytes device={dev.type} torch={torch.__version__}", flush=True)

    # computed: this rank's time from the step's start to its gradients' communication (the end
    # of backward). A rank that gets there before the slowest waits inside the call for the
    # difference: arrival skew, counted in comm_ms, which no collective algorithm can remove.
    losses, step_ms, comm_ms, computed = [], [], [], []
    loss_buf = torch.zeros(1, dtype=torch.float64)
    for step in range(args.steps):
        comm.Barrier()  # each step starts together: step_ms is not skewed by the previous one
        t0 = time.perf_counter()
        x, y = batch(data, step, rank, args)
        x, y = x.to(dev), y.to(dev)
        if args.mode == "ddp":
            buckets.zero()
            loss = model(x, y)
            loss.backward()
            for b, g in zip(buckets.buckets, buckets.grads):
                check_views(b, g)
            computed.append(time.perf_counter() - t0)
            spent = buckets.reduce(args.overlap)
        else:
            grad.zero_()
            loss = model(x, y)
            loss.backward()
            check_views(params, grad)
            t1 = time.perf_counter()
            computed.append(t1 - t0)
            comm.Reduce_scatter_block(mpibuf(grad), mpibuf(shard.grad))
            spent = time.perf_counter() - t1
            shard.grad.div_(size)
        if args.mode == "ddp":
            opt.step()
        else:
            opt.step()
            t1 = time.perf_counter()
            comm.Allgather(mpibuf(shard.data), mpibuf(flat))
            spent += time.perf_counter() - t1
        sched.step()
        if dev.type == "cuda":
            torch.cuda.synchronize()
        dt = time.perf_counter() - t0
        loss_buf[0] = loss.item()
        comm.Allreduce(MPI.IN_PLACE, [loss_buf.numpy(), MPI.DOUBLE])
        mean_loss = loss_buf.item() / size
        if not math.isfinite(mean_loss):
            if rank == 0:
                print(f"torch_train: loss is {mean_loss} at step {step + 1}", flush=True)
        losses.append(mean_loss)
        step_ms.append(dt * 1e3)
        comm_ms.append(spent * 1e3)
        if rank == 0 and args.print_every > 0 and ((step + 1) % args.print_every == 0 or step == 0
                                                     or step + 1 == args.steps):
            print(f"step {step + 1}/{args.steps} loss {mean_loss:.6f} step_ms {dt * 1e3:.2f} "
                  f"comm_ms {spent * 1e3:.2f}", flush=True)

    # Every rank must end with rank 0's parameters (a wrong reduction shows here).
    mine = torch.cat([p.data.reshape(-1) for p in params]).cpu()
    ref = mine.clone()
    comm.Bcast([ref.numpy(), MPI.FLOAT], root=0)
    same = comm.allreduce(int(torch.equal(mine, ref)), op=MPI.MIN)
    # The slowest rank's compute time per step, in one call after training (none added per step).
    slowest = torch.tensor(computed, dtype=torch.float64)
    comm.Allreduce(MPI.IN_PLACE, [slowest.numpy(), MPI.DOUBLE], op=MPI.MAX)
    wait_ms = [(s - c) * 1e3 for s, c in zip(slowest.tolist(), computed)]
    record = {"loss": losses, "step_ms": step_ms, "comm_ms": comm_ms, "arrival_wait_ms": wait_ms, "ranks": size,
              "mode": args.mode, "overlap": args.overlap, "params": nparams, "same_params": same}
    if rank == 0:
        tail = losses[-20:]
        later = slice(1, None) if len(step_ms) > 1 else slice(None)
        mean = lambda v: sum(v) / len(v)
        record["final"] = (f"final_loss={mean(tail):.9g} mean_step_ms={mean(step_ms[later]):.3f} "
              f"mean_comm_ms={mean(comm_ms[later]):.3f} mean_arrival_wait_ms={mean(wait_ms[later]):.3f} "
              f"params={nparams} ranks={size} "
              f"mode={args.mode}{'+overlap' if args.overlap else ''} steps={args.steps} "
              f"buckets={nbuckets} first_loss={losses[0]:.9g} same_params={same}")
        print(record["final"], flush=True)
        if args.loss_file:
            with open(args.loss_file, "w") as f:
                json.dump(record, f)
        if args.done:
            open(args.done, "w").close()
    if not same:
        if rank == 0:
            print("torch_train: ranks ended with different parameters", file=sys.stderr)
        sys.exit(1)
    return record


if __name__ == "__main__":
    main()
