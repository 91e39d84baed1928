"""The three operator contexts, every mode, against numpy references computed from
deterministic small-integer inputs of every rank (bitwise equal); argument errors."""
import json
import os
import shutil
import tempfile

import numpy as np
import pytest

import tilecomm
from mpi4py import MPI
from conftest import MODES, small_ints


# ---- GemvAllReduce: y = sum_r W_r x_r ----

def gemv_inputs(r, m):
    k = 5 + 3 * r  # K_r differs per rank
    return small_ints((m, k), seed=100 + r), small_ints(k, seed=200 + r)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("m,tile", [(64, 0), (301, 16)])
def test_gemv_allreduce(comm, device, mode, m, tile):
    ref = sum(w @ x for w, x in (gemv_inputs(r, m) for r in range(comm.size)))
    w, x = gemv_inputs(comm.rank, m)
    with tilecomm.GemvAllReduce(comm, device, m, w.shape[1], tile=tile) as op:
        assert (op.m, op.k_local) == (m, w.shape[1])
        y = op.run(w, x, mode=mode)
        assert y.dtype == np.float32 and y.shape == (m,)
        np.testing.assert_array_equal(y, ref)
        given = np.full(m, -5, np.float32)
        assert op.run(w, x, given, mode) is given
        np.testing.assert_array_equal(given, ref)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("n,algo", [(2, "one_shot"), (3, "two_shot"), (8, "auto")])
def test_gemv_allreduce_batch(comm, device, mode, n, algo):
    m = 301  # X_r [k_r, n], Y [m, n]: n vectors per call
    ins = [(small_ints((m, 5 + 3 * r), seed=100 + r), small_ints((5 + 3 * r, n), seed=300 + r))
           for r in range(comm.size)]
    ref = sum(w @ x for w, x in ins)
    w, x = ins[comm.rank]
    with tilecomm.GemvAllReduce(comm, device, m, w.shape[1], batch=n, fused_algorithm=algo) as op:
        assert op.batch == n
        y = op.run(w, x, mode=mode)
        assert y.shape == (m, n)
        np.testing.assert_array_equal(y, ref)
        with pytest.raises(ValueError, match=r"x must have shape"):
            op.run(w, x[:, :1].copy())


@pytest.mark.parametrize("algo", ["one_shot", "two_shot"])
def test_gemv_fused_algorithms(comm, device, algo):
    m = 301
    ref = sum(w @ x for w, x in (gemv_inputs(r, m) for r in range(comm.size)))
    w, x = gemv_inputs(comm.rank, m)
    with tilecomm.GemvAllReduce(comm, device, m, w.shape[1], fused_algorithm=algo) as op:
        assert op.fused_algorithm == algo
        np.testing.assert_array_equal(op.run(w, x, mode="fused"), ref)
    with tilecomm.GemvAllReduce(comm, device, m, w.shape[1]) as op:
        assert op.fused_algorithm == "one_shot"  # auto: small output
    with pytest.raises(tilecomm.Error, match="fused_algorithm 'three_shot' is not one of"):
        tilecomm.GemvAllReduce(comm, device, m, w.shape[1], fused_algorithm="three_shot")


def test_gemv_errors(comm, device):
    m = 16
    w, x = gemv_inputs(comm.rank, m)
    k = w.shape[1]
    with tilecomm.GemvAllReduce(comm, device, m, k) as op:
        with pytest.raises(TypeError, match="w must have dtype float32, got float64"):
            op.run(w.astype(np.float64), x)
        with pytest.raises(TypeError, match="numpy.ndarray"):
            op.run(w, x.tolist())
        with pytest.raises(ValueError, match=r"w must have shape \(16, %d\), got \(%d, 16\)" % (k, k)):
            op.run(np.ascontiguousarray(w.T).reshape(k, m), x)
        with pytest.raises(ValueError, match="C-contiguous"):
            op.run(np.asfortranarray(w), x)
        with pytest.raises(ValueError, match=r"x must have shape"):
            op.run(w, x[:-1].copy())
        with pytest.raises(TypeError, match="y must have dtype float32"):
            op.run(w, x, np.zeros(m, np.float64))
        with pytest.raises(ValueError, match=r"y must have shape \(16,\)"):
            op.run(w, x, np.zeros(m + 1, np.float32))
        ro = np.zeros(m, np.float32)
        ro.flags.writeable = False
        with pytest.raises(ValueError, match="writeable"):
            op.run(w, x, ro)
        big = np.zeros(m * k + m, np.float32)
        with pytest.raises(ValueError, match="overlaps"):
            op.run(big[: m * k].reshape(m, k), x, big[m * k - 1: m * k - 1 + m])
        with pytest.raises(tilecomm.Error, match="not one of") as e:
            op.run(w, x, mode="overlapped")
        assert e.value.code == "InvalidArgument"
        # still usable after all that
        np.testing.assert_array_equal(
            op.run(w, x), sum(a @ b for a, b in (gemv_inputs(r, m) for r in range(comm.size))))
    with pytest.raises(ValueError, match="GemvAllReduce is closed"):
        op.run(w, x)


def test_gemv_auto_settles_on_one_mode_everywhere(comm, device):
    """mode="auto": a pass over the three modes, each a lead-in and auto_rounds timed calls (one or
    two passes more when the result is not clear; no short-trial passes with auto_min_trial_ms=0),
    every result exact; then auto_choice names the same mode on every rank."""
    m = 128
    ref = sum(w @ x for w, x in (gemv_inputs(r, m) for r in range(comm.size)))
    w, x = gemv_inputs(comm.rank, m)
    with tilecomm.GemvAllReduce(comm, device, m, w.shape[1], auto_rounds=1,
                                auto_min_trial_ms=0) as op:
        for call in range(20):  # passes of 3 x (lead-in + 1 timed call): settled after 6, 12, 18
            if call < 6 or call == 18:
                assert (op.auto_choice is None) == (call < 6), call
            np.testing.assert_array_equal(op.run(w, x, mode="auto"), ref)
        choice = op.auto_choice
        assert choice in ("sequential", "shaped", "fused")
        assert MPI.COMM_WORLD.allgather(choice) == [choice] * comm.size


def sequential_wins_profile():
    """A cost profile (docs/model.md) in which sequential is more than 3x faster than the other
    modes with peers (Auto's margin), with 8 tiles and 8 chunks: a GEMV tile costs 1 s, a launch
    2 s, a flag and the proxy 20 s each (sequential 6 s, shaped and fused 26 s)."""
    def fit(c0=0.0, c1=0.0):
        return {"c": [c0, c1, 0.0], "rms_s": 0.0, "max_rel": 0.0, "points": 3}

    def path(cpu=0.0):
        return {"measured": True, "time": fit(), "cpu_send": fit(cpu), "cpu_recv": fit(cpu)}

    return {"format": "tilecomm-profile-1", "host": "test", "version": "test", "cus": 2,
            "ranks": 2, "nodes": 1,
            "compute": {"gemv": fit(1.0), "embedding": fit(), "gemm": fit(), "reduce": fit()},
            "paths": {"shm": path(), "mpi": path()},
            "overheads": {"proxy_s": 20.0, "flag_s": 20.0, "launch_s": 2.0, "barrier_s": 0.0}}


def test_gemv_auto_from_a_profile(comm):
    """profile=: Auto predicts from the file and settles on the first call (no trial calls); a
    named file that is missing raises tilecomm.Error naming it."""
    m = 1024
    ref = sum(w @ x for w, x in (gemv_inputs(r, m) for r in range(comm.size)))
    w, x = gemv_inputs(comm.rank, m)
    d = tempfile.mkdtemp(prefix="tilecomm_py_profile_")
    dev = tilecomm.Device(cus=2, slots=2)
    try:
        path = os.path.join(d, "profile.json")
        with open(path, "w") as f:
            json.dump(sequential_wins_profile(), f)
        with tilecomm.GemvAllReduce(comm, dev, m, w.shape[1], tile=128, shaped_chunks=8,
                                    profile=path) as op:
            np.testing.assert_array_equal(op.run(w, x, mode="auto"), ref)
            if comm.size > 1:  # one rank: fused ties sequential, so Auto measures
                assert op.auto_choice == "sequential"
        missing = os.path.join(d, "missing.json")
        with pytest.raises(tilecomm.Error, match="missing.json"):
            tilecomm.GemvAllReduce(comm, dev, m, w.shape[1], profile=missing)
    finally:
        dev.close()
        shutil.rmtree(d)


@pytest.mark.parametrize("policy", ["lds", "cu_mask", "nonblocking"])
def test_shaped_policies_match_sequential(comm, policy):
    m = 301
    dev = tilecomm.Device(cus=2, slots=2)  # cu_mask needs a second CU
    ref = sum(w @ x for w, x in (gemv_inputs(r, m) for r in range(comm.size)))
    w, x = gemv_inputs(comm.rank, m)
    with tilecomm.GemvAllReduce(comm, dev, m, w.shape[1], tile=16, shaped_policy=policy) as op:
        np.testing.assert_array_equal(op.run(w, x, mode="shaped"), ref)
    with pytest.raises(tilecomm.Error, match="not one of: lds, cu_mask, nonblocking"):
        tilecomm.GemvAllReduce(comm, dev, m, w.shape[1], shaped_policy="cores")
    dev.close()


def test_gemv_shape_mismatch_raises_on_every_rank(comm, device):
    if comm.size == 1:
        pytest.skip("needs two ranks")
    with pytest.raises(tilecomm.Error) as e:
        tilecomm.GemvAllReduce(comm, device, 8 + comm.rank, 4)
    assert e.value.code == "Mismatch"


# ---- EmbeddingAllToAll ----

def tables_of(r):
    return 1 + r % 2


def make_table(gt, dim, batch, call):
    """Global table gt: weights, CSR bags over the whole batch (empty bags too), and per-sample
    weights on odd tables. The same on every rank."""
    rows = 20 + 13 * gt
    rng = np.random.default_rng(1000 * gt + call)
    w = small_ints((rows, dim), seed=7 * gt + call)
    sizes = rng.integers(0, 5, size=batch)
    off = np.concatenate(([0], np.cumsum(sizes))).astype(np.int64)
    idx = rng.integers(0, rows, size=int(off[-1])).astype(np.int64)
    pw = small_ints(idx.size, seed=gt + 99, r=1) if gt % 2 else None
    return w, idx, off, pw


def pooled(table, b, pooling):
    w, idx, off, pw = table
    lo, hi = off[b], off[b + 1]
    rows = w[idx[lo:hi]]
    if pw is not None:
        rows = rows * pw[lo:hi, None]
    acc = rows.sum(axis=0, dtype=np.float32) if hi > lo else np.zeros(w.shape[1], np.float32)
    if pooling == "mean" and hi > lo:
        acc = acc / np.float32(hi - lo)
    return acc


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("pooling", ["sum", "mean"])
def test_embedding_alltoall(comm, device, mode, pooling):
    p, me = comm.size, comm.rank
    dim, batch = 24, 37  # batch not a multiple of the ranks
    first = sum(tables_of(r) for r in range(me))
    total = sum(tables_of(r) for r in range(p))
    mine = range(first, first + tables_of(me))
    rows = [20 + 13 * gt for gt in mine]
    with tilecomm.EmbeddingAllToAll(comm, device, rows, dim, batch, pooling, tile=4) as op:
        assert (op.num_tables, op.first_table, op.dim) == (total, first, dim)
        assert op.table_rows == rows
        for call in range(2):
            all_tables = [make_table(gt, dim, batch, call) for gt in range(total)]
            lb, b0 = op.local_batch, op.batch_begin
            ref = np.zeros((lb, total, dim), np.float32)
            for b in range(lb):
                for gt in range(total):
                    ref[b, gt] = pooled(all_tables[gt], b0 + b, pooling)
            t = [all_tables[gt] for gt in mine]
            # indices of the first table as int32 and offsets as a list: converted to int64
            indices = [t[0][1].astype(np.int32)] + [x[1] for x in t[1:]]
            offsets = [t[0][2].tolist()] + [x[2] for x in t[1:]]
            out = op.run([x[0] for x in t], indices, offsets, [x[3] for x in t], mode=mode)
            assert out.shape == (lb, total, dim)
            np.testing.assert_array_equal(out, ref, err_msg=f"call {call}")


def bf16_bits(a):
    """float32 -> bfloat16 bit patterns (uint16). Exact for the small integers used here."""
    bits = (np.ascontiguousarray(a, np.float32).view(np.uint32) >> 16).astype(np.uint16)
    assert np.array_equal((bits.astype(np.uint32) << 16).view(np.float32), a)
    return bits


def embedding_case(op, dim, batch, pooling, call, me, p):
    """This rank's tables/bags of one call and the reference for its slice."""
    first = sum(tables_of(r) for r in range(me))
    total = sum(tables_of(r) for r in range(p))
    all_tables = [make_table(gt, dim, batch, call) for gt in range(total)]
    ref = np.zeros((op.local_batch, total, dim), np.float32)
    for b in range(op.local_batch):
        for gt in range(total):
            ref[b, gt] = pooled(all_tables[gt], op.batch_begin + b, pooling)
    return all_tables[first:first + tables_of(me)], ref


@pytest.mark.parametrize("mode", MODES)
def test_embedding_alltoall_bf16_tables(comm, device, mode):
    """bfloat16 tables (uint16 bits with table_dtype="bfloat16") give bitwise the float32 result."""
    dim, batch = 24, 37
    rows = [20 + 13 * gt for gt in range(sum(tables_of(r) for r in range(comm.rank)),
                                         sum(tables_of(r) for r in range(comm.rank + 1)))]
    with tilecomm.EmbeddingAllToAll(comm, device, rows, dim, batch, "sum", tile=4) as op:
        for call in range(2):
            t, ref = embedding_case(op, dim, batch, "sum", call, comm.rank, comm.size)
            out = op.run([bf16_bits(x[0]) for x in t], [x[1] for x in t], [x[2] for x in t],
                         [x[3] for x in t], mode=mode, table_dtype="bfloat16")
            np.testing.assert_array_equal(out, ref, err_msg=f"call {call}")
        with pytest.raises(TypeError, match=r"tables\[0\] must be a uint16 or int16 array"):
            op.run([x[0] for x in t], [x[1] for x in t], [x[2] for x in t],
                   table_dtype="bfloat16")
        with pytest.raises(ValueError, match="table_dtype 'half'"):
            op.run([x[0] for x in t], [x[1] for x in t], [x[2] for x in t], table_dtype="half")


def test_embedding_alltoall_zero_copy(comm, device):
    """output(): a view of the shared segment that a fused run() fills without copies; the views
    alternate, and using one in another mode or after its call is an InvalidArgument."""
    dim, batch = 16, 29
    rows = [20 + 13 * gt for gt in range(sum(tables_of(r) for r in range(comm.rank)),
                                         sum(tables_of(r) for r in range(comm.rank + 1)))]
    with tilecomm.EmbeddingAllToAll(comm, device, rows, dim, batch, "mean") as op:
        views = []
        for call in range(4):
            t, ref = embedding_case(op, dim, batch, "mean", call, comm.rank, comm.size)
            tables = [x[0] for x in t] if call % 2 == 0 else [bf16_bits(x[0]) for x in t]
            view = op.output()
            assert view.shape == (op.local_batch, op.num_tables, dim) and view.dtype == np.float32
            out = op.run(tables, [x[1] for x in t], [x[2] for x in t], [x[3] for x in t], out=view,
                         table_dtype="float32" if call % 2 == 0 else "bfloat16")
            assert out is view
            np.testing.assert_array_equal(view, ref, err_msg=f"call {call}")
            views.append(view.__array_interface__["data"][0])
        if op.local_batch > 0:
            assert views[0] == views[2] and views[1] == views[3] and views[0] != views[1]
            args = ([x[0] for x in t], [x[1] for x in t], [x[2] for x in t], [x[3] for x in t])
            with pytest.raises(tilecomm.Error, match="only Mode::Fused"):
                op.run(*args, out=op.output(), mode="sequential")
            with pytest.raises(tilecomm.Error, match="not output\\(\\) of this call"):
                op.run(*args, out=view, mode="fused")  # the previous call's view


def test_embedding_errors(comm, device):
    dim, batch = 8, 10
    rows = [20] * tables_of(comm.rank)
    tabs = [small_ints((20, dim), seed=i) for i in range(len(rows))]
    off = [np.arange(batch + 1, dtype=np.int64) for _ in rows]
    idx = [np.arange(batch, dtype=np.int64) for _ in rows]
    with pytest.raises(ValueError, match="pooling 'max'"):
        tilecomm.EmbeddingAllToAll(comm, device, rows, dim, batch, "max")
    with tilecomm.EmbeddingAllToAll(comm, device, rows, dim, batch) as op:
        with pytest.raises(ValueError, match="tables must have %d entries" % len(rows)):
            op.run(tabs + tabs, idx, off)
        with pytest.raises(ValueError, match=r"tables\[0\] must have shape \(20, 8\)"):
            op.run([t[:10].copy() for t in tabs], idx, off)
        with pytest.raises(TypeError, match=r"tables\[0\] must have dtype float32"):
            op.run([t.astype(np.float64) for t in tabs], idx, off)
        with pytest.raises(TypeError, match=r"indices\[0\] must have an integer dtype"):
            op.run(tabs, [i.astype(np.float32) for i in idx], off)
        with pytest.raises(ValueError, match=r"weights\[0\] must have shape \(10,\)"):
            op.run(tabs, idx, off, [np.ones(3, np.float32) for _ in rows])
        with pytest.raises(ValueError, match=r"out must have shape"):
            op.run(tabs, idx, off, out=np.zeros((1, 1, 1), np.float32))
        with pytest.raises(ValueError, match="out overlaps"):
            op.run(tabs, idx, off, out=tabs[0].reshape(-1)[: op.local_batch * op.num_tables * dim]
                   .reshape(op.local_batch, op.num_tables, dim))
        # out-of-range index: found by the library, raised on every rank
        bad = [i.copy() for i in idx]
        bad[0][3] = 20
        with pytest.raises(tilecomm.Error) as e:
            op.run(tabs, bad, off)
        assert e.value.code == "InvalidArgument"


# ---- GemmAllToAll ----

def experts_of(r):
    return 1 + r % 2


def gemm_weight(g, k, n):
    return small_ints((k, n), seed=500 + g)


def gemm_rows(s, g, call, k):
    """Rows source rank s routes to global expert g in this call (uneven, with zeros)."""
    cnt = ((s * 7 + g * 13 + call * 5) % 23) * ((g + s + call) % 4 != 0)
    return small_ints((cnt, k), seed=10000 * s + 100 * g + call)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("k,n,tile", [(24, 40, 0), (16, 33, 5)])
def test_gemm_alltoall(comm, device, mode, k, n, tile):
    p, me = comm.size, comm.rank
    first = [sum(experts_of(r) for r in range(q)) for q in range(p + 1)]
    G = first[p]
    ne = experts_of(me)
    weights = [gemm_weight(first[me] + e, k, n) for e in range(ne)]
    with tilecomm.GemmAllToAll(comm, device, ne, k, n, 2000, 2000, tile=tile) as op:
        assert (op.num_experts, op.first_expert, op.local_experts) == (G, first[me], ne)
        assert (op.k, op.n) == (k, n)
        for call in range(2):
            recv_counts, xs = [], []
            for e in range(ne):
                for s in range(p):
                    rows = gemm_rows(s, first[me] + e, call, k)
                    recv_counts.append(rows.shape[0])
                    xs.append(rows)
            x = np.concatenate(xs).astype(np.float32).reshape(-1, k)
            mine = [gemm_rows(me, g, call, k) for g in range(G)]
            send_counts = [r.shape[0] for r in mine]
            ref = np.concatenate([r @ gemm_weight(g, k, n) for g, r in enumerate(mine)])
            y = op.run(weights, x, recv_counts, send_counts, mode=mode)
            assert y.shape == (sum(send_counts), n)
            np.testing.assert_array_equal(y, ref, err_msg=f"call {call}")
            # the whole layer from this rank's routed tokens (dispatch inside the call)
            tokens = np.concatenate(mine).astype(np.float32).reshape(-1, k)
            y2 = op.run_layer(weights, tokens, recv_counts, send_counts, mode=mode)
            np.testing.assert_array_equal(y2, ref, err_msg=f"run_layer call {call}")
            # weights packed once (set_weights), then calls without them
            op.set_weights(weights)
            np.testing.assert_array_equal(op.run(None, x, recv_counts, send_counts, mode=mode), ref)
            np.testing.assert_array_equal(
                op.run_layer(None, tokens, recv_counts, send_counts, mode=mode), ref)
            with pytest.raises(ValueError, match="run_layer: tokens"):
                op.run_layer(weights, x[:0] if len(tokens) else np.zeros((1, k), np.float32),
                             recv_counts, send_counts, mode=mode)
            if mode == "fused":  # zero-copy: into output(), run() and run_layer()
                rows = sum(send_counts)
                for layer in (False, True):
                    view = op.output()
                    assert view.shape == (2000, n) and view.dtype == np.float32
                    args = (tokens if layer else x, recv_counts, send_counts)
                    fn = op.run_layer if layer else op.run
                    out = fn(weights, *args, y=view[:rows], mode="fused")
                    np.testing.assert_array_equal(out, ref, err_msg=f"output() layer={layer}")
                    np.testing.assert_array_equal(view[:rows], ref)
                if rows > 0:  # (an empty y overlaps nothing)
                    with pytest.raises(tilecomm.Error, match="only Mode::Fused"):
                        op.run(weights, x, recv_counts, send_counts, y=op.output()[:rows],
                               mode="sequential")


def test_gemm_errors(comm, device):
    p, me = comm.size, comm.rank
    ne, k, n = experts_of(me), 4, 6
    G = sum(experts_of(r) for r in range(p))
    w = [np.ones((k, n), np.float32) for _ in range(ne)]
    recv, send = [1] * (ne * p), [1] * G
    x = np.ones((ne * p, k), np.float32)
    with tilecomm.GemmAllToAll(comm, device, ne, k, n, 100, 100) as op:
        with pytest.raises(ValueError, match=r"x must have shape \(%d, 4\)" % (ne * p)):
            op.run(w, x[:-1], recv, send)
        with pytest.raises(ValueError, match="C-contiguous"):
            op.run([np.ones((n, k), np.float32).T for _ in range(ne)], x, recv, send)
        with pytest.raises(TypeError, match="dtype float32"):
            op.run([a.astype(np.int32) for a in w], x, recv, send)
        with pytest.raises(ValueError, match="weights must have %d entries" % ne):
            op.run(w + w, x, recv, send)
        big = np.ones(ne * p * k + G * n, np.float32)
        xv = big[: ne * p * k].reshape(ne * p, k)
        with pytest.raises(ValueError, match="y overlaps"):
            op.run(w, xv, recv, send, y=big[ne * p * k - 1: -1].reshape(G, n))
        with pytest.raises(ValueError, match="must not be negative"):
            op.run(w, x, recv, [-1] * G)
        y = op.run(w, x, recv, send)
        np.testing.assert_array_equal(y, np.full((G, n), k, np.float32))
    if p > 1:
        # rank 0 routes one row more to the last expert than its owner expects: Mismatch on every
        # rank. On a communicator of its own in verify mode (check=1), whatever TILECOMM_CHECK
        # says: without it the mismatch fails the context and its communicator (by design), and
        # the session's communicator must stay usable for the other tests.
        bad = list(send)
        if me == 0:
            bad[-1] = 2
        with tilecomm.Communicator(MPI.COMM_WORLD, check=1) as verified, \
                tilecomm.GemmAllToAll(verified, device, ne, k, n, 100, 100) as op:
            with pytest.raises(tilecomm.Error) as e:
                op.run(w, x, recv, bad)
            assert e.value.code == "Mismatch"
