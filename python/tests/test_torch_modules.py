"""The modules against single-process PyTorch references that hold the whole weights (the same on
every rank): small-integer weights and inputs, so every result is exact in any summation order.
Every mode; backward raises NotImplementedError naming the module."""
import pytest

torch = pytest.importorskip("torch")
import tilecomm.torch  # noqa: E402
from tilecomm.torch import MoEExperts, RowParallelLinear, ShardedEmbeddingBags  # noqa: E402

MODES = ("auto", "sequential", "shaped", "fused")


def ints(shape, seed, r=3):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(-r, r + 1, shape, generator=g).float()


@pytest.mark.parametrize("mode", MODES)
def test_row_parallel_linear(comm, device, mode):
    w, b = ints((70, 131), 1), ints((70,), 2)
    ref = torch.nn.Linear(131, 70)
    with torch.no_grad():
        ref.weight.copy_(w)
        ref.bias.copy_(b)
    m = RowParallelLinear.from_full(w, b, comm=comm, device=device, mode=mode)
    assert m.weight.shape == (70, m.k_end - m.k_begin)
    x = ints((2, 3, 131), 3)  # a few tokens, leading dims kept
    with torch.no_grad():
        assert torch.equal(m(x), ref(x))
    # this rank's slice only
    mp = RowParallelLinear.from_full(w, None, comm=comm, device=device, mode=mode,
                                     input_is_parallel=True)
    with torch.no_grad():
        assert torch.equal(mp(x[0, :, mp.k_begin:mp.k_end].contiguous()), x[0] @ w.t())


def _bags(t, batch, rows):
    g = torch.Generator().manual_seed(100 + t)
    sizes = torch.randint(0, 4, (batch,), generator=g)
    offsets = torch.cat([torch.zeros(1, dtype=torch.int64), sizes.cumsum(0)[:-1]])
    indices = torch.randint(0, rows, (int(sizes.sum()),), generator=g)
    return indices, offsets


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("pooling", ["sum", "mean"])
def test_sharded_embedding_bags(comm, device, mode, pooling):
    rows, dim, batch = [30, 17, 45, 8, 22], 12, 13
    tables = [ints((r, dim), 10 + t) for t, r in enumerate(rows)]
    bags = [_bags(t, batch, r) for t, r in enumerate(rows)]
    psw = [ints((bags[t][0].numel(),), 50 + t, r=1) if t % 2 and pooling == "sum" else None
           for t in range(len(rows))]
    m = ShardedEmbeddingBags.from_full(tables, batch, pooling=pooling, comm=comm, device=device,
                                       mode=mode)
    with torch.no_grad():
        out = m([b[0] for b in bags], [b[1] for b in bags], psw if pooling == "sum" else None)
    assert out.shape == (m.local_batch, len(rows), dim)
    lo, hi = m.batch_begin, m.batch_begin + m.local_batch
    for t, w in enumerate(tables):
        eb = torch.nn.EmbeddingBag.from_pretrained(w, mode=pooling)
        want = eb(bags[t][0], bags[t][1], per_sample_weights=psw[t] if pooling == "sum" else None)
        assert torch.equal(out[:, t], want[lo:hi]), f"table {t}"


@pytest.mark.parametrize("mode", MODES)
def test_sharded_embedding_bags_bf16(comm, device, mode):
    """bfloat16 weights (small integers: exact) give bitwise the float32 module's output."""
    rows, dim, batch = [30, 17, 45, 8, 22], 12, 13
    tables = [ints((r, dim), 10 + t) for t, r in enumerate(rows)]
    bags = [_bags(t, batch, r) for t, r in enumerate(rows)]
    m32 = ShardedEmbeddingBags.from_full(tables, batch, comm=comm, device=device, mode=mode)
    m16 = ShardedEmbeddingBags.from_full([w.bfloat16() for w in tables], batch, comm=comm,
                                         device=device, mode=mode)
    assert all(w.dtype == torch.bfloat16 for w in m16.weights)
    with torch.no_grad():
        out16 = m16([b[0] for b in bags], [b[1] for b in bags])
        out32 = m32([b[0] for b in bags], [b[1] for b in bags])
    assert out16.dtype == torch.float32
    assert torch.equal(out16, out32)
    with pytest.raises(ValueError, match="dtype torch.float16"):
        ShardedEmbeddingBags(rows, dim, batch, comm=comm, device=device, dtype=torch.float16)


@pytest.mark.parametrize("mode", MODES)
def test_moe_experts(comm, device, mode):
    G, hidden, n = 5, 16, 24
    weights = [ints((hidden, n), 200 + e) for e in range(G)]
    m = MoEExperts.from_full(weights, max_tokens=256, comm=comm, device=device, mode=mode)
    tokens = 20 + 7 * comm.rank  # differs per rank
    x = ints((tokens, hidden), 300 + comm.rank)
    g = torch.Generator().manual_seed(400 + comm.rank)
    expert = torch.randint(0, G, (tokens,), generator=g)
    expert[0] = G - 1  # the last expert always has work
    with torch.no_grad():
        y = m(x, expert)
    want = torch.stack([x[t] @ weights[int(expert[t])] for t in range(tokens)])
    assert torch.equal(y, want)


def test_backward_raises_naming_the_module(comm, device):
    lin = RowParallelLinear(8, 4, comm=comm, device=device)
    y = lin(torch.ones(1, 8))
    with pytest.raises(NotImplementedError, match=r"tilecomm.torch.RowParallelLinear: backward"):
        y.sum().backward()
    emb = ShardedEmbeddingBags([4, 4], 2, 3, comm=comm, device=device)
    out = emb([torch.tensor([0, 1, 2])] * 2, [torch.tensor([0, 1, 2])] * 2)
    if len(emb.weights):  # a rank without tables has no parameter to differentiate
        with pytest.raises(NotImplementedError, match=r"ShardedEmbeddingBags: backward"):
            out.sum().backward()
    moe = MoEExperts(2, 4, 3, 16, comm=comm, device=device)
    # activations in training require grad (a rank may own no expert, hence no parameter)
    y = moe(torch.ones(2, 4, requires_grad=True), torch.tensor([0, 1]))
    with pytest.raises(NotImplementedError, match=r"MoEExperts: backward"):
        y.sum().backward()


def test_bad_arguments(comm, device):
    with pytest.raises(ValueError, match="mode 'fast' is not one of"):
        RowParallelLinear(8, 4, comm=comm, device=device, mode="fast")
    lin = RowParallelLinear(8, 4, comm=comm, device=device)
    with pytest.raises(ValueError, match="x has 7 features, expected 8"):
        lin(torch.ones(1, 7))
    moe = MoEExperts(2, 4, 3, 16, comm=comm, device=device)
    with pytest.raises(ValueError, match=r"expert ids must be in \[0, 2\)"):
        moe(torch.ones(2, 4), torch.tensor([0, 2]))
