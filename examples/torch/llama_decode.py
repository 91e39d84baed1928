"""A small Llama-style decoder, tensor-parallel over the ranks, generating tokens one at a time
(batch 1, greedy), run three ways in one mpirun job and checked against each other:

  gloo      plain PyTorch, the row-parallel sums and the logits gather through a gloo group
  tilecomm  the same code, the collectives through the "tilecomm" torch.distributed backend
  fused     the row-parallel projections are tilecomm.torch.RowParallelLinear (GemvAllReduce:
            GEMV and AllReduce fused), the logits gather through the "tilecomm" backend

    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
    mpirun -np 2 --oversubscribe --bind-to none --mca mpi_yield_when_idle 1 \\
        env PYTHONPATH=<build>/python /usr/bin/python3 examples/torch/llama_decode.py \\
        [--hidden 1024] [--heads 16] [--ffn 2816] [--layers 4] [--vocab 4096] [--tokens 32] \\
        [--repeats 5] [--mode fused|shaped|sequential|auto] [--seed 0]

The model (random weights, float32, the same on every rank before sharding; Megatron-style TP):
  token embedding (replicated)
  per layer:  x += o_proj(attention(qkv_proj(rmsnorm(x))))
              x += down_proj(silu(gate_proj(h)) * up_proj(h)),  h = rmsnorm(x)
  final rmsnorm, lm_head, argmax.
qkv_proj and gate/up_proj are column-parallel (each rank owns heads/p attention heads and ffn/p
intermediate features, computed locally, no communication); o_proj and down_proj are
row-parallel (each rank owns the matching input columns; the partial products are summed over
the ranks: all_reduce, or GemvAllReduce in the fused variant); lm_head is vocab-parallel (each
rank computes vocab/p logits, all_gather'ed before the argmax). Two all-reduces per layer and one
all-gather per token, as in Megatron-LM decode.
Simplified attention (stated): multi-head causal attention over a KV cache, no rotary position
embedding, no grouped-query heads; it is computed locally on each rank's heads, so it does not
change the communication pattern.

Agreement: every variant generates --tokens tokens from the same start token; the tokens must be
identical and every step's logits within a relative error (max |diff| / max |logit|) of 1e-4 of
the gloo variant's. Not bitwise: GemvAllReduce's GEMV and torch's matrix-vector product add the
K terms in different orders (blocking, vector width) and float32 addition is not associative;
the expected difference is ~sqrt(K) * 2^-24 relative per projection (~1e-6), compounding over the
layers, far below 1e-4, while a wrong shard or a missing sum is O(1). Exit code 1 on disagreement.
--perturb (for the test that the check fails) adds 1e-2 to one row of a fused weight.
Throughput: tokens/s of each variant, median [min, max] over --repeats timed generations (each
--tokens tokens from an empty KV cache, slowest rank's time), and the speed-up vs gloo.
"""
import argparse
import math
import sys

import torch
import torch.distributed as dist
import torch.nn.functional as F

import common
from tilecomm.torch import RowParallelLinear


def rmsnorm(x, w, eps=1e-5):
    return x * torch.rsqrt(x.pow(2).mean() + eps) * w


class Layer:
    """One decoder layer's shards on this rank."""


class TPDecoder:
    """This rank's shards of the model, built from full random weights generated identically on
    every rank (one layer at a time, so the full model never exists in memory)."""

    def __init__(self, args, rank, size):
        H, F_, V, nh = args.hidden, args.ffn, args.vocab, args.heads
        if H % nh or nh % size or F_ % size or V % size:
            raise SystemExit(f"llama_decode: need hidden % heads == 0 and heads, ffn, vocab "
                             f"divisible by the {size} ranks (hidden {H}, heads {nh}, ffn {F_}, "
                             f"vocab {V})")
        self.H, self.F, self.d = H, F_, H // nh
        self.nh_local = nh // size
        self.Hl, self.Fl, self.Vl = H // size, F_ // size, V // size
        hs = slice(rank * self.Hl, (rank + 1) * self.Hl)    # this rank's heads' features
        fs = slice(rank * self.Fl, (rank + 1) * self.Fl)    # this rank's intermediate features
        g = torch.Generator().manual_seed(args.seed)

        def rand(*shape):  # N(0, 1/fan_in): activations stay O(1) through the layers
            return torch.randn(*shape, generator=g) / math.sqrt(shape[-1])

        self.embed = torch.randn(V, H, generator=g)
        self.layers = []
        for _ in range(args.layers):
            L = Layer()
            L.n1 = 1 + 0.1 * torch.randn(H, generator=g)
            L.n2 = 1 + 0.1 * torch.randn(H, generator=g)
            wq, wk, wv, wo = rand(H, H), rand(H, H), rand(H, H), rand(H, H)
            wg, wu, wd = rand(F_, H), rand(F_, H), rand(H, F_)
            # column-parallel: this rank's output rows of q, k, v (gate, up), stacked
            L.wqkv = torch.cat([wq[hs], wk[hs], wv[hs]]).contiguous()      # [3 Hl, H]
            L.wgu = torch.cat([wg[fs], wu[fs]]).contiguous()               # [2 Fl, H]
            # row-parallel: this rank's input columns
            L.wo = wo[:, hs].contiguous()                                  # [H, Hl]
            L.wd = wd[:, fs].contiguous()                                  # [H, Fl]
            self.layers.append(L)
        self.nf = 1 + 0.1 * torch.randn(H, generator=g)
        self.lm = rand(V, H)[rank * self.Vl:(rank + 1) * self.Vl].contiguous()   # [Vl, H]

    def fused_projections(self, mode, perturb):
        """RowParallelLinear modules holding the same shards (input_is_parallel: the input is
        this rank's slice, as the column-parallel layer before it leaves it)."""
        for i, L in enumerate(self.layers):
            L.o_mod = RowParallelLinear(self.H, self.H, bias=False, mode=mode,
                                        input_is_parallel=True)
            L.d_mod = RowParallelLinear(self.F, self.H, bias=False,
                                        mode=mode, input_is_parallel=True)
            for m, w in ((L.o_mod, L.wo), (L.d_mod, L.wd)):
                # the module splits in_features the same way (equal blocks in rank order)
                assert m.weight.shape == w.shape, (m.weight.shape, w.shape)
                with torch.no_grad():
                    m.weight.copy_(w)
            if perturb and i == 0:
                with torch.no_grad():
                    L.d_mod.weight[0] += 1e-2   # one output row of the first down_proj

    def generate(self, n_tokens, row_parallel, gather, start=1):
        """Greedy decode of n_tokens from `start`. row_parallel(layer, "o"|"d", x_local) returns
        the summed [H] output; gather(logits_local) returns all [V] logits. Returns (tokens,
        [logits per step])."""
        d, nh = self.d, self.nh_local
        k_cache = [torch.empty(n_tokens, nh, d) for _ in self.layers]
        v_cache = [torch.empty(n_tokens, nh, d) for _ in self.layers]
        tok, tokens, all_logits = start, [], []
        for t in range(n_tokens):
            x = self.embed[tok].clone()
            for i, L in enumerate(self.layers):
                # attention: q, k, v of this rank's heads (column-parallel, local)
                q, k, v = torch.mv(L.wqkv, rmsnorm(x, L.n1)).view(3, nh, d)
                k_cache[i][t], v_cache[i][t] = k, v
                K, Vv = k_cache[i][:t + 1], v_cache[i][:t + 1]               # [t+1, nh, d]
                p = torch.softmax(torch.einsum("thd,hd->ht", K, q) / math.sqrt(d), dim=-1)
                attn = torch.einsum("ht,thd->hd", p, Vv).reshape(-1)         # [Hl]
                x = x + row_parallel(L, "o", attn)                           # sum over ranks
                # MLP: gate and up on this rank's features (column-parallel, local)
                gt, up = torch.mv(L.wgu, rmsnorm(x, L.n2)).view(2, -1)
                x = x + row_parallel(L, "d", F.silu(gt) * up)                # sum over ranks
            logits = gather(torch.mv(self.lm, rmsnorm(x, self.nf)))
            tok = int(torch.argmax(logits))
            tokens.append(tok)
            all_logits.append(logits)
        return tokens, all_logits


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--hidden", type=int, default=1024)
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--ffn", type=int, default=2816)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--vocab", type=int, default=4096)
    ap.add_argument("--tokens", type=int, default=32, help="tokens generated per run")
    common.add_run_options(ap, "RowParallelLinear",
                           "change one fused weight (the check must then fail)")
    args = ap.parse_args()

    world, groups = common.setup(args.pg)
    p, me = world.size, world.rank
    model = TPDecoder(args, me, p)
    model.fused_projections(args.mode, args.perturb)

    def plain(group):
        """The plain-PyTorch collectives on `group`."""
        def row_parallel(L, which, x_local):
            y = torch.mv(L.wo if which == "o" else L.wd, x_local)           # partial product
            dist.all_reduce(y, group=group)
            return y

        def gather(local):
            parts = [torch.empty_like(local) for _ in range(p)]
            dist.all_gather(parts, local, group=group)
            return torch.cat(parts)
        return row_parallel, gather

    def fused_row_parallel(L, which, x_local):
        return (L.o_mod if which == "o" else L.d_mod)(x_local)              # GemvAllReduce

    fns = {"gloo": plain(groups["gloo"]), "tilecomm": plain(groups["tilecomm"]),
           "fused": (fused_row_parallel, plain(groups["tilecomm"])[1])}
    if "tilecomm-py" in groups:  # --pg both
        fns["tilecomm-py"] = plain(groups["tilecomm-py"])

    if me == 0:
        print(f"llama_decode: {p} ranks, {args.layers} layers, hidden {args.hidden} "
              f"({args.heads} heads of {args.hidden // args.heads}), ffn {args.ffn}, vocab "
              f"{args.vocab}, {args.tokens} tokens per run, batch 1 greedy; fused mode "
              f"{args.mode}{', PERTURBED' if args.perturb else ''}")
    with torch.no_grad():
        # First run of each variant: warm-up (gloo's connections, the device's workers) and the
        # outputs that are checked.
        out = {n: model.generate(args.tokens, *f) for n, f in fns.items()}
        ref_tokens, ref_logits = out["gloo"]
        errors = {}
        for n in [v for v in out if v != "gloo"]:
            tokens, logits = out[n]
            errors[f"{n} vs gloo, logits max relative error"] = max(common.max_rel_error(a, b)
                                                for a, b in zip(ref_logits, logits))
            errors[f"{n} vs gloo, fraction of tokens differing"] = (
                sum(a != b for a, b in zip(tokens, ref_tokens)) / len(tokens))
        if me == 0:
            print(f"  tokens: {' '.join(map(str, ref_tokens))}")
        ok = common.agree(errors, 1e-4, world)
        times = common.time_runs({n: (lambda f=f: model.generate(args.tokens, *f))
                                  for n, f in fns.items()}, args.repeats, world)
    common.report(f"  tokens/s, median [min, max] over {args.repeats} runs of {args.tokens} "
                  f"tokens (slowest rank):", "tokens", args.tokens, times, world)
    if me == 0:
        print("PASSED" if ok else "FAILED: the variants disagree")
    dist.destroy_process_group()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
