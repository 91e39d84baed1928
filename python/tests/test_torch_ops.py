"""The operator contexts on torch tensors: the same results as on numpy arrays, no copies (a given
output tensor is written in place and returned; a new output is a tensor), and the numpy error
rules for bad tensors (dtype, device, non-contiguous, shape), raised before any communication."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
import tilecomm  # noqa: E402
from conftest import MODES, small_ints  # noqa: E402
from test_ops import experts_of, gemm_rows, gemm_weight, gemv_inputs, make_table  # noqa: E402


@pytest.mark.parametrize("mode", MODES)
def test_gemv_on_tensors(comm, device, mode):
    m = 97
    w, x = gemv_inputs(comm.rank, m)
    with tilecomm.GemvAllReduce(comm, device, m, w.shape[1]) as op:
        want = op.run(w, x, mode=mode)
        tw, tx = torch.from_numpy(w), torch.from_numpy(x)
        y = op.run(tw, tx, mode=mode)
        assert isinstance(y, torch.Tensor) and y.dtype == torch.float32 and y.shape == (m,)
        np.testing.assert_array_equal(y.numpy(), want)
        out = torch.full((m,), -5.0)
        ptr = out.data_ptr()
        assert op.run(tw, tx, out, mode) is out and out.data_ptr() == ptr
        np.testing.assert_array_equal(out.numpy(), want)
        # tensors that require grad are read through detach() (forward only)
        assert torch.equal(op.run(tw.clone().requires_grad_(), tx, mode=mode), y)


def test_embedding_on_tensors(comm, device):
    from test_ops import tables_of
    p, me = comm.size, comm.rank
    dim, batch = 16, 11
    first = sum(tables_of(r) for r in range(me))
    mine = range(first, first + tables_of(me))
    rows = [20 + 13 * gt for gt in mine]
    t = [make_table(gt, dim, batch, 0) for gt in mine]
    with tilecomm.EmbeddingAllToAll(comm, device, rows, dim, batch, "sum") as op:
        want = op.run([x[0] for x in t], [x[1] for x in t], [x[2] for x in t], [x[3] for x in t])
        got = op.run([torch.from_numpy(x[0]) for x in t], [torch.from_numpy(x[1]) for x in t],
                     [torch.from_numpy(x[2]) for x in t],
                     [None if x[3] is None else torch.from_numpy(x[3]) for x in t])
        if rows:
            assert isinstance(got, torch.Tensor)
        np.testing.assert_array_equal(np.asarray(got), want)
        # torch.bfloat16 tables (small integers: exact) into the zero-copy output as a tensor
        view = op.output(as_tensor=True)
        assert isinstance(view, torch.Tensor) and view.shape == want.shape
        got16 = op.run([torch.from_numpy(x[0]).bfloat16() for x in t], [x[1] for x in t],
                       [x[2] for x in t], [x[3] for x in t], out=view)
        assert got16 is view
        np.testing.assert_array_equal(view.numpy(), want)
        if rows:
            with pytest.raises(TypeError, match=r"tables\[0\] must have dtype torch.bfloat16"):
                op.run([torch.from_numpy(x[0]) for x in t], [x[1] for x in t], [x[2] for x in t],
                       table_dtype="bfloat16")


def test_gemm_on_tensors(comm, device):
    p, me = comm.size, comm.rank
    k, n = 8, 12
    first = [sum(experts_of(r) for r in range(q)) for q in range(p + 1)]
    ne = experts_of(me)
    weights = [gemm_weight(first[me] + e, k, n) for e in range(ne)]
    recv_counts, xs = [], []
    for e in range(ne):
        for s in range(p):
            r = gemm_rows(s, first[me] + e, 0, k)
            recv_counts.append(r.shape[0])
            xs.append(r)
    x = np.concatenate(xs).astype(np.float32).reshape(-1, k)
    send_counts = [gemm_rows(me, g, 0, k).shape[0] for g in range(first[p])]
    with tilecomm.GemmAllToAll(comm, device, ne, k, n, 2000, 2000) as op:
        want = op.run(weights, x, recv_counts, send_counts)
        got = op.run([torch.from_numpy(w) for w in weights], torch.from_numpy(x), recv_counts,
                     send_counts)
        assert isinstance(got, torch.Tensor)
        np.testing.assert_array_equal(got.numpy(), want)


def test_bad_tensors(comm, device):
    m = 16
    w, x = gemv_inputs(comm.rank, m)
    k = w.shape[1]
    tw, tx = torch.from_numpy(w), torch.from_numpy(x)
    with tilecomm.GemvAllReduce(comm, device, m, k) as op:
        with pytest.raises(TypeError, match=r"w must have dtype torch.float32, got torch.float64"):
            op.run(tw.double(), tx)
        with pytest.raises(TypeError, match=r"x must have dtype torch.float32, got torch.bfloat16"):
            op.run(tw, tx.bfloat16())
        with pytest.raises(ValueError, match=r"w must be a CPU tensor, got device meta"):
            op.run(torch.empty((m, k), device="meta"), tx)
        with pytest.raises(ValueError, match=r"w must be contiguous \(tensor.contiguous"):
            op.run(torch.from_numpy(np.ascontiguousarray(w.T)).t(), tx)
        with pytest.raises(ValueError, match=r"x must have shape \(%d,\), got \(%d,\)" % (k, k - 1)):
            op.run(tw, tx[:-1])
        with pytest.raises(ValueError, match=r"y must have shape \(16,\)"):
            op.run(tw, tx, torch.zeros(m + 1))
        with pytest.raises(ValueError, match="y overlaps"):
            op.run(tw, tx, tw.view(-1)[:m])
        # nothing was communicated: the next call agrees on every rank
        np.testing.assert_array_equal(op.run(tw, tx).numpy(), op.run(w, x))


def test_collectives_take_tensors(comm, world):
    a = torch.from_numpy(small_ints(100, seed=comm.rank, dtype=np.float64))
    want = np.empty(100)
    world.Allreduce(a.numpy(), want)
    tilecomm.allreduce(comm, a, a)  # in place, in the tensor's memory
    np.testing.assert_array_equal(a.numpy(), want)
    with pytest.raises(ValueError, match=r"send must be contiguous"):
        tilecomm.allreduce(comm, torch.ones(4, 4).t())
