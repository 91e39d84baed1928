"""A DLRM-style model (sparse features through table-wise sharded embedding bags, a dense bottom
MLP, dot-product interaction, a top MLP), forward passes over random batches, run three ways in
one mpirun job and checked against each other:

  gloo      plain PyTorch: torch.nn.functional.embedding_bag on this rank's tables for the whole
            batch, then all_to_all_single (with split sizes) through a gloo group so that every
            rank gets its slice of the batch for every table
  tilecomm  the same code, the all_to_all_single through the "tilecomm" torch.distributed backend
  fused     tilecomm.torch.ShardedEmbeddingBags (EmbeddingAllToAll: pooling and exchange fused)

    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
    mpirun -np 2 --oversubscribe --bind-to none --mca mpi_yield_when_idle 1 \\
        env PYTHONPATH=<build>/python /usr/bin/python3 examples/torch/dlrm.py \\
        [--batch 1024] [--dim 32] [--rows 100000,50000,...] [--pool 20] [--dense 13] \\
        [--bot 512-256] [--top 512-256] [--steps 4] [--repeats 5] [--mode fused|...] [--seed 0]

Parallelism (as in DLRM's hybrid scheme): the embedding tables are model-parallel (table t
lives on one rank; consecutive tables per rank, nearly equal counts); everything after the
exchange is data-parallel (rank r computes samples [b_r, b_r + B_r) of the global batch, nearly
equal split, with replicated MLP weights). Every rank knows the whole batch's sparse input (the
same random bags); its dense input is its slice of the batch. The forward per batch:
  emb   [B_r, T, dim] = pooled bags (sum) of every table for this rank's samples (the exchange)
  z0    [B_r, dim]    = bottom MLP (dense -> bot... -> dim, ReLU)
  inter               = the strictly-lower triangle of Z Z^T, Z = [z0, emb] ([B_r, T+1, dim])
  logit [B_r]         = top MLP ([z0, inter] -> top... -> 1, ReLU between)
Bags: 1 to 2*pool - 1 lookups each (mean pool), uniform over the table's rows. Random weights,
float32, the same on every rank (tables generated on their owners only).

Agreement: the exchanged embeddings and the logits of every batch must be within a relative error
(max |diff| / max |value|) of 1e-4 of the gloo variant's. Not bitwise in general: tilecomm's
pooling and torch's embedding_bag may add a bag's rows in different orders (vector width,
unrolling), and float32 addition is not associative (~1e-7 relative per sum of ~20 rows),
while a wrong table, bag or batch slice is O(1). Exit code 1 on disagreement. --perturb (for the
test that the check fails) adds 1e-2 to the fused variant's first table on every rank.
Throughput: samples/s of each variant, median [min, max] over --repeats timed runs of --steps
batches (slowest rank's time), and the speed-up vs gloo.
"""
import argparse
import sys

import torch
import torch.distributed as dist
import torch.nn.functional as F

import common
from tilecomm.torch import ShardedEmbeddingBags


def split(n, parts, i):
    """[begin, end) of part i of n items in `parts` nearly equal consecutive blocks (the modules'
    split of tables and of the batch)."""
    q, r = divmod(n, parts)
    begin = i * q + min(i, r)
    return begin, begin + q + (i < r)


def mlp(sizes, g):
    """torch.nn.Sequential of Linear layers with ReLU between (not after the last)."""
    layers = []
    for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:])):
        lin = torch.nn.Linear(a, b)
        with torch.no_grad():
            lin.weight.copy_(torch.randn(b, a, generator=g) / a ** 0.5)
            lin.bias.copy_(0.1 * torch.randn(b, generator=g))
        layers.append(lin)
        if i < len(sizes) - 2:
            layers.append(torch.nn.ReLU())
    return torch.nn.Sequential(*layers)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--batch", type=int, default=1024, help="global batch")
    ap.add_argument("--dim", type=int, default=32, help="embedding dimension")
    ap.add_argument("--rows", default="100000,50000,20000,80000,10000,60000,30000,5000",
                    help="rows of each table (comma-separated; their count is the table count)")
    ap.add_argument("--pool", type=int, default=20, help="mean lookups per bag")
    ap.add_argument("--dense", type=int, default=13, help="dense features")
    ap.add_argument("--bot", default="512-256", help="bottom MLP hidden sizes (dense->...->dim)")
    ap.add_argument("--top", default="512-256", help="top MLP hidden sizes (...->1)")
    ap.add_argument("--steps", type=int, default=4, help="batches per timed run")
    common.add_run_options(ap, "ShardedEmbeddingBags",
                           "change the fused variant's first table (the check must then fail)")
    args = ap.parse_args()

    world, groups = common.setup(args.pg)
    p, me = world.size, world.rank
    rows = [int(r) for r in args.rows.split(",")]
    T, d, B = len(rows), args.dim, args.batch
    t0, t1 = split(T, p, me)                                  # this rank's tables
    tables_of = [split(T, p, r) for r in range(p)]
    batch_of = [split(B, p, r) for r in range(p)]             # every rank's samples
    b0, b1 = batch_of[me]
    Bl = b1 - b0

    # This rank's tables (each from its own seed, generated on its owner only).
    tables = [torch.randn(rows[t], d, generator=torch.Generator().manual_seed(args.seed * 1000 + t))
              for t in range(t0, t1)]
    sharded = ShardedEmbeddingBags(rows, d, B, pooling="sum", mode=args.mode)
    assert (sharded.first_table, sharded.batch_begin, sharded.local_batch) == (t0, b0, Bl)
    with torch.no_grad():
        for w, tab in zip(sharded.weights, tables):
            w.copy_(tab)
        if args.perturb and len(tables):
            sharded.weights[0] += 1e-2
    # Replicated dense MLPs.
    g = torch.Generator().manual_seed(args.seed + 1)
    bot = mlp([args.dense] + [int(s) for s in args.bot.split("-")] + [d], g)
    n_inter = (T + 1) * T // 2
    top = mlp([d + n_inter] + [int(s) for s in args.top.split("-")] + [1], g)
    li, lj = torch.tril_indices(T + 1, T + 1, offset=-1)

    # Random batches (the same on every rank; not timed): per table 1-D indices and bag offsets
    # (torch.nn.EmbeddingBag's layout) for the whole batch, and this rank's dense rows.
    gb = torch.Generator().manual_seed(args.seed + 2)
    batches = []
    for _ in range(args.steps):
        idx, off = [], []
        for t in range(T):
            sizes = torch.randint(1, 2 * args.pool, (B,), generator=gb)
            off.append(torch.cat([torch.zeros(1, dtype=torch.int64), sizes.cumsum(0)[:-1]]))
            idx.append(torch.randint(0, rows[t], (int(sizes.sum()),), generator=gb))
        dense = torch.randn(B, args.dense, generator=gb)[b0:b1].contiguous()
        batches.append((idx, off, dense))

    def plain_exchange(group):
        """Pool this rank's tables for the whole batch, all_to_all_single on `group`."""
        in_splits = [(t1 - t0) * (e - s) * d for s, e in batch_of]        # to rank r: its rows
        out_splits = [(e - s) * Bl * d for s, e in tables_of]            # from rank s: its tables

        def exchange(idx, off):
            pooled = torch.stack([F.embedding_bag(idx[t], tables[t - t0], off[t], mode="sum")
                                  for t in range(t0, t1)]) if t1 > t0 else torch.empty(0, B, d)
            send = torch.cat([pooled[:, s:e].reshape(-1) for s, e in batch_of])
            recv = torch.empty(sum(out_splits))
            dist.all_to_all_single(recv, send, out_splits, in_splits, group=group)
            parts = [part.view(-1, Bl, d) for part in recv.split(out_splits)]
            return torch.cat(parts).permute(1, 0, 2)                      # [Bl, T, d]
        return exchange

    def fused_exchange(idx, off):
        return sharded(idx, off)                                         # [Bl, T, d]

    def forward(exchange, idx, off, dense):
        emb = exchange(idx, off)
        z0 = bot(dense)                                                  # [Bl, d]
        z = torch.cat([z0.unsqueeze(1), emb], dim=1)                     # [Bl, T+1, d]
        inter = torch.bmm(z, z.transpose(1, 2))[:, li, lj]               # [Bl, T(T+1)/2]
        return emb, top(torch.cat([z0, inter], dim=1)).squeeze(1)        # logits [Bl]

    exchanges = {"gloo": plain_exchange(groups["gloo"]),
                 "tilecomm": plain_exchange(groups["tilecomm"]), "fused": fused_exchange}
    if "tilecomm-py" in groups:  # --pg both
        exchanges["tilecomm-py"] = plain_exchange(groups["tilecomm-py"])

    def run(exchange):
        return [forward(exchange, *b) for b in batches]

    if me == 0:
        print(f"dlrm: {p} ranks, {T} tables (rows {args.rows}), dim {d}, global batch {B}, "
              f"~{args.pool} lookups/bag, bottom MLP {args.dense}-{args.bot}-{d}, top MLP "
              f"{d + n_inter}-{args.top}-1, {args.steps} batches per run; fused mode "
              f"{args.mode}{', PERTURBED' if args.perturb else ''}")
    with torch.no_grad():
        # First run of each variant: warm-up and the outputs that are checked.
        out = {n: run(ex) for n, ex in exchanges.items()}
        errors = {}
        for n in [v for v in out if v != "gloo"]:
            for what, k in (("embeddings", 0), ("logits", 1)):
                errors[f"{n} vs gloo, {what} max relative error"] = max(
                    common.max_rel_error(a[k], b[k]) for a, b in zip(out["gloo"], out[n]))
        ok = common.agree(errors, 1e-4, world)
        times = common.time_runs({n: (lambda ex=ex: run(ex)) for n, ex in exchanges.items()},
                                 args.repeats, world)
    common.report(f"  samples/s, median [min, max] over {args.repeats} runs of {args.steps} "
                  f"batches of {B} (slowest rank):", "samples", args.steps * B, times, world)
    if me == 0:
        print("PASSED" if ok else "FAILED: the variants disagree")
    dist.destroy_process_group()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
