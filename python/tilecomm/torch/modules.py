"""Model modules whose forward is one of tilecomm's fused operators.

RowParallelLinear    tensor-parallel decode: the weight split along its input dimension, forward =
                     GemvAllReduce per token.
ShardedEmbeddingBags table-wise sharded embedding bags (DLRM), forward = EmbeddingAllToAll.
MoEExperts           expert-parallel experts, forward = dispatch (all-to-all of the tokens) +
                     GemmAllToAll (expert GEMMs, results returned to the tokens' ranks).

Every module is built collectively (its operator context is) on `comm`: a tilecomm.Communicator,
the ProcessGroupTilecomm of a "tilecomm" torch group, or None (the world group when
torch.distributed runs the tilecomm backend, else one Communicator over MPI_COMM_WORLD shared by
the modules). `device` is a tilecomm.Device (None: one shared default). `mode`: "auto" (the
operator's Mode::Auto: the first forward calls try each mode, then every rank keeps the fastest;
`module.op.auto_choice` names it), "sequential", "shaped" or "fused". Parameters are float32 and hold this
rank's shard (ShardedEmbeddingBags: float32 or bfloat16); from_full() builds a module from the
whole weights (the same on every rank).

Forward only: the operators have no backward; calling backward() through a module's output raises
NotImplementedError naming the module. Inputs are read without copies where the layout allows
(contiguous float32 CPU tensors).
"""
import torch
import torch.distributed as dist
from mpi4py import MPI

import tilecomm
from tilecomm.torch._backend import GROUP_TYPES

_MODES = ("auto", "sequential", "shaped", "fused")
_shared = {}


def _comm(comm):
    if isinstance(comm, tilecomm.Communicator):
        return comm
    if isinstance(comm, GROUP_TYPES):
        return comm.comm
    if comm is not None:
        raise TypeError(f"comm must be a tilecomm.Communicator, a ProcessGroupTilecomm or None, "
                        f"got {type(comm).__name__}")
    if dist.is_initialized() and isinstance(dist.group.WORLD, GROUP_TYPES):
        return dist.group.WORLD.comm
    if "comm" not in _shared:
        _shared["comm"] = tilecomm.Communicator(MPI.COMM_WORLD)
    return _shared["comm"]


def _device(device):
    if device is not None:
        return device
    if "device" not in _shared:
        _shared["device"] = tilecomm.Device()
    return _shared["device"]


def _mode(mode):
    if mode not in _MODES:
        raise ValueError(f"mode '{mode}' is not one of: {', '.join(_MODES)}")
    return mode


def _split(n, parts, i):
    """[begin, end) of part i when n items are split into `parts` nearly equal blocks."""
    q, r = divmod(n, parts)
    begin = i * q + min(i, r)
    return begin, begin + q + (i < r)


class _ForwardOnly(torch.autograd.Function):
    """Ties a module's output to its parameters and inputs so that backward() reaches here and
    raises, instead of silently producing no gradient."""

    @staticmethod
    def forward(ctx, name, out, *tensors):
        ctx.name = name
        return out.view_as(out)

    @staticmethod
    def backward(ctx, *grads):
        raise NotImplementedError(f"tilecomm.torch.{ctx.name}: backward is not implemented "
                                  "(the module is forward only)")


def _forward_only(name, out, *tensors):
    if torch.is_grad_enabled() and any(t.requires_grad for t in tensors):
        return _ForwardOnly.apply(name, out, *tensors)
    return out


class RowParallelLinear(torch.nn.Module):
    """y = x W^T + b with W [out_features, in_features] split along in_features: this rank holds
    weight [out_features, k_local] (columns [k_begin, k_end)), and forward sums every rank's
    partial product with GemvAllReduce, all of a call's tokens at once (decode: one or a few
    tokens; n tokens are one GemvAllReduce with batch n, a context per n built on first use, so
    every rank must call forward with the same number of tokens, as tensor parallelism does).

    forward(x): x [..., in_features] (the full input, the same on every rank; this rank reads its
    columns) or, with input_is_parallel=True, [..., k_local] (this rank's slice). Returns
    [..., out_features] on every rank. The bias (full, not split) is added once."""

    def __init__(self, in_features, out_features, bias=True, comm=None, device=None, mode="auto",
                 input_is_parallel=False):
        super().__init__()
        self.comm, self.device = _comm(comm), _device(device)
        self.mode = _mode(mode)
        self.in_features, self.out_features = in_features, out_features
        self.input_is_parallel = input_is_parallel
        self.k_begin, self.k_end = _split(in_features, self.comm.size, self.comm.rank)
        k_local = self.k_end - self.k_begin
        self.weight = torch.nn.Parameter(torch.zeros(out_features, k_local))
        self.bias = torch.nn.Parameter(torch.zeros(out_features)) if bias else None
        self.op = tilecomm.GemvAllReduce(self.comm, self.device, out_features, k_local)
        self._batched = {}  # n > 1 -> GemvAllReduce with batch n

    @classmethod
    def from_full(cls, weight, bias=None, **kwargs):
        """From the whole weight [out_features, in_features] (and bias), the same on every rank."""
        m = cls(weight.shape[1], weight.shape[0], bias=bias is not None, **kwargs)
        with torch.no_grad():
            m.weight.copy_(weight[:, m.k_begin:m.k_end])
            if bias is not None:
                m.bias.copy_(bias)
        return m

    def forward(self, x):
        k = self.k_end - self.k_begin if self.input_is_parallel else self.in_features
        if x.shape[-1] != k:
            raise ValueError(f"RowParallelLinear: x has {x.shape[-1]} features, expected {k}")
        lead = x.shape[:-1]
        xs = x.detach().reshape(-1, k).float()
        if not self.input_is_parallel:
            xs = xs[:, self.k_begin:self.k_end]
        xs = xs.contiguous()
        w = self.weight.detach()
        n = xs.shape[0]
        if n == 1:
            y = self.op.run(w, xs[0], None, self.mode).reshape(1, self.out_features)
        elif n > 1:
            op = self._batched.get(n)
            if op is None:  # collective: every rank gets here with the same n
                op = self._batched[n] = tilecomm.GemvAllReduce(
                    self.comm, self.device, self.out_features, xs.shape[1], batch=n)
            # GemvAllReduce takes X [k_local, n] and gives Y [out_features, n], row-major
            y = op.run(w, xs.t().contiguous(), None, self.mode).t()
        else:
            y = torch.empty(0, self.out_features)
        if self.bias is not None:
            y += self.bias.detach()
        y = y.reshape(*lead, self.out_features)
        return _forward_only("RowParallelLinear", y, x, *self.parameters())

    def extra_repr(self):
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"k_local=[{self.k_begin}, {self.k_end}), mode={self.mode}")


def _offsets_csr(offsets, n_indices, batch, where):
    """torch.nn.EmbeddingBag offsets (batch starts, or batch+1 with the end) as CSR int64."""
    off = torch.as_tensor(offsets, dtype=torch.int64).reshape(-1)
    if off.numel() == batch:
        off = torch.cat([off, torch.tensor([n_indices], dtype=torch.int64)])
    if off.numel() != batch + 1:
        raise ValueError(f"{where} has {off.numel()} entries; the global batch is {batch} "
                         f"(give {batch} starts, or {batch + 1} with the end)")
    return off


class ShardedEmbeddingBags(torch.nn.Module):
    """Table-wise sharded embedding bags: table t (rows num_embeddings[t], all of embedding_dim) is
    owned by one rank (consecutive tables per rank, nearly equal counts). forward pools every
    bag of the global batch from the local tables and returns, on each rank, its slice of the batch
    for every table: [local_batch, num_tables, embedding_dim] (local_batch = batch rows
    [batch_begin, batch_begin + local_batch), nearly equal split of global_batch).

    forward(indices, offsets, per_sample_weights=None): one entry per global table (the same
    global sparse input on every rank; only the local tables' entries are read), each as
    torch.nn.EmbeddingBag takes it: 1-D indices and offsets of global_batch bag starts (or
    global_batch + 1 with the end). mode: "sum" | "mean" pooling.

    dtype: the weights' storage, torch.float32 or torch.bfloat16 (half the bytes to gather; every
    element is widened exactly and pooled in float32, so the output, always float32, is bitwise the
    float32 module's on the widened weights). from_full() takes the tables' dtype unless given."""

    def __init__(self, num_embeddings, embedding_dim, global_batch, pooling="sum", comm=None,
                 device=None, mode="auto", dtype=torch.float32):
        super().__init__()
        if dtype not in (torch.float32, torch.bfloat16):
            raise ValueError(f"ShardedEmbeddingBags: dtype {dtype} is not torch.float32 or "
                             f"torch.bfloat16")
        self.comm, self.device = _comm(comm), _device(device)
        self.mode = _mode(mode)
        self.num_embeddings = list(num_embeddings)
        self.embedding_dim, self.global_batch, self.pooling = embedding_dim, global_batch, pooling
        self.first_table, end = _split(len(self.num_embeddings), self.comm.size, self.comm.rank)
        local = self.num_embeddings[self.first_table:end]
        self.weights = torch.nn.ParameterList(
            [torch.nn.Parameter(torch.zeros(rows, embedding_dim, dtype=dtype)) for rows in local])
        self.op = tilecomm.EmbeddingAllToAll(self.comm, self.device, local, embedding_dim,
                                             global_batch, pooling)
        assert self.op.first_table == self.first_table
        self.local_batch, self.batch_begin = self.op.local_batch, self.op.batch_begin

    @classmethod
    def from_full(cls, tables, global_batch, **kwargs):
        """From every table's weight [rows, dim] (the same list on every rank). The module stores
        bfloat16 when the tables are bfloat16 (unless dtype= says otherwise), else float32."""
        if tables[0].dtype == torch.bfloat16:
            kwargs.setdefault("dtype", torch.bfloat16)
        m = cls([t.shape[0] for t in tables], tables[0].shape[1], global_batch, **kwargs)
        with torch.no_grad():
            for i, w in enumerate(m.weights):
                w.copy_(tables[m.first_table + i])
        return m

    def forward(self, indices, offsets, per_sample_weights=None):
        n = len(self.num_embeddings)
        for name, v in (("indices", indices), ("offsets", offsets)):
            if len(v) != n:
                raise ValueError(f"ShardedEmbeddingBags: {name} has {len(v)} entries, one per "
                                 f"global table ({n}) expected")
        if per_sample_weights is not None and len(per_sample_weights) != n:
            raise ValueError(f"ShardedEmbeddingBags: per_sample_weights has "
                             f"{len(per_sample_weights)} entries, {n} expected")
        mine = range(self.first_table, self.first_table + len(self.weights))
        idx = [torch.as_tensor(indices[t]).reshape(-1) for t in mine]
        off = [_offsets_csr(offsets[t], idx[i].numel(), self.global_batch,
                            f"ShardedEmbeddingBags: offsets[{t}]") for i, t in enumerate(mine)]
        psw = None
        if per_sample_weights is not None:
            psw = [per_sample_weights[t] for t in mine]
        out = torch.empty(self.local_batch, n, self.embedding_dim)
        self.op.run([w.detach() for w in self.weights], idx, off, psw, out, self.mode)
        return _forward_only("ShardedEmbeddingBags", out, *self.parameters())


class MoEExperts(torch.nn.Module):
    """Expert-parallel experts y_t = x_t W_{e(t)} (W_e [hidden, out_features]; top-1 routing):
    num_experts experts numbered globally, consecutive per rank (nearly equal counts).
    forward(x, expert): x [tokens, hidden] float32 and expert [tokens] (global expert of each token)
    on every rank (tokens may differ per rank). The counts are exchanged with an allgather, then one
    GemmAllToAll.run_layer call dispatches the tokens to their experts' ranks, computes, and returns
    each result row to its token's rank. Returns [tokens, out_features]
    in the tokens' order. max_tokens bounds the rows a rank sends or receives per call."""

    def __init__(self, num_experts, hidden, out_features, max_tokens, comm=None, device=None,
                 mode="auto"):
        super().__init__()
        self.comm, self.device = _comm(comm), _device(device)
        self.mode = _mode(mode)
        self.num_experts, self.hidden, self.out_features = num_experts, hidden, out_features
        self.max_tokens = max_tokens
        p = self.comm.size
        self.bounds = [_split(num_experts, p, r) for r in range(p)]
        self.first_expert, end = self.bounds[self.comm.rank]
        self.weights = torch.nn.ParameterList(
            [torch.nn.Parameter(torch.zeros(hidden, out_features))
             for _ in range(end - self.first_expert)])
        self.op = tilecomm.GemmAllToAll(self.comm, self.device, end - self.first_expert, hidden,
                                        out_features, max_tokens, max_tokens)

    @classmethod
    def from_full(cls, weights, max_tokens, **kwargs):
        """From every expert's weight [hidden, out_features] (the same list on every rank)."""
        m = cls(len(weights), weights[0].shape[0], weights[0].shape[1], max_tokens, **kwargs)
        with torch.no_grad():
            for i, w in enumerate(m.weights):
                w.copy_(weights[m.first_expert + i])
        return m

    def forward(self, x, expert):
        p, me, G = self.comm.size, self.comm.rank, self.num_experts
        if x.dim() != 2 or x.shape[1] != self.hidden:
            raise ValueError(f"MoEExperts: x must be [tokens, {self.hidden}], got "
                             f"{tuple(x.shape)}")
        expert = torch.as_tensor(expert, dtype=torch.int64).reshape(-1)
        if expert.numel() != x.shape[0]:
            raise ValueError(f"MoEExperts: expert has {expert.numel()} entries for "
                             f"{x.shape[0]} tokens")
        if expert.numel() and (int(expert.min()) < 0 or int(expert.max()) >= G):
            raise ValueError(f"MoEExperts: expert ids must be in [0, {G})")
        if x.shape[0] > self.max_tokens:
            raise ValueError(f"MoEExperts: {x.shape[0]} tokens > max_tokens {self.max_tokens}")
        # Tokens grouped by global expert (stable: their order within an expert is kept).
        order = torch.argsort(expert, stable=True)
        send_counts = torch.bincount(expert, minlength=G)
        xs = x.detach().float()[order].contiguous()
        # Every rank's counts per expert: counts[s, g].
        counts = torch.from_numpy(
            tilecomm.allgather(self.comm, send_counts.numpy())).reshape(p, G)
        lo, hi = self.first_expert, self.first_expert + len(self.weights)
        if int(counts[:, lo:hi].sum()) > self.max_tokens:
            raise tilecomm.Error(f"MoEExperts: this rank's experts receive "
                                 f"{int(counts[:, lo:hi].sum())} rows > max_tokens "
                                 f"{self.max_tokens}")
        # Dispatch, expert GEMMs and return in one call (GemmAllToAll.run_layer: in fused mode each
        # expert's tiles start as its rows arrive).
        recv_counts = [int(counts[s, e]) for e in range(lo, hi) for s in range(p)]
        y_sorted = self.op.run_layer([w.detach() for w in self.weights], xs, recv_counts,
                                     send_counts.tolist(), None, self.mode)
        y = torch.empty(x.shape[0], self.out_features)
        y[order] = y_sorted
        return _forward_only("MoEExperts", y, x, *self.parameters())
