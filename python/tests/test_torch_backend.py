"""The "tilecomm" torch.distributed backend against gloo, in the same job, on random data.

gloo (torch 1.13) provides all_reduce (no avg), broadcast, all_gather (list), all_to_all_single and
barrier for CPU tensors, and no bfloat16: the other references are computed from gloo's all_gather
of every rank's input in float64 / int64. Inputs are random small integers, so every sum is exact
in any order and results are compared exactly, for every dtype. Errors must be raised before any
communication: each error test is followed by a collective that must still agree on every rank.
The world group is the default implementation (the C++ ProcessGroupTilecomm when tilecomm._torch_pg
was built, else the Python PyProcessGroupTilecomm); test_both_implementations_on_one_group runs a
group of each.
"""
import gc
import time

import numpy as np
import pytest

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")
import tilecomm.torch  # noqa: E402  -- registers the backend
from mpi4py import MPI  # noqa: E402

DTYPES = (torch.float32, torch.float64, torch.int32, torch.int64, torch.bfloat16)
OPS = {"sum": dist.ReduceOp.SUM, "max": dist.ReduceOp.MAX, "min": dist.ReduceOp.MIN}


@pytest.fixture(scope="module")
def groups():
    """The world group on tilecomm, and a gloo group over the same ranks for references."""
    if not dist.is_initialized():
        dist.init_process_group("tilecomm", **tilecomm.torch.mpi_rendezvous())
    return dist.group.WORLD, dist.new_group(backend="gloo")


def rand(shape, seed, dtype, r=20):
    g = torch.Generator().manual_seed(seed)
    shape = (shape,) if isinstance(shape, int) else shape
    return torch.randint(-r, r + 1, shape, generator=g).to(dtype)


def gathered(t, gloo):
    """Every rank's t (gloo, as float64 / int64 so gloo can carry bfloat16): [size, *t.shape]."""
    wide = t.to(torch.int64 if not t.is_floating_point() else torch.float64)
    out = [torch.empty_like(wide) for _ in range(dist.get_world_size())]
    dist.all_gather(out, wide, group=gloo)
    return torch.stack(out)


def reduce(stack, op):
    if op == "sum":
        return stack.sum(0)
    if op == "max":
        return stack.max(0).values
    return stack.min(0).values


def test_world_matches_mpi(groups):
    assert dist.get_backend() == "tilecomm"
    assert dist.get_rank() == MPI.COMM_WORLD.rank
    assert dist.get_world_size() == MPI.COMM_WORLD.size
    assert isinstance(groups[0], tilecomm.torch.ProcessGroupTilecomm)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("async_op", [False, True])
def test_all_reduce(groups, dtype, op, async_op):
    _, gloo = groups
    x = rand((3, 257), seed=dist.get_rank() + 7, dtype=dtype)
    if dtype == torch.bfloat16:
        want = reduce(gathered(x, gloo), op).to(dtype)
    else:
        want = x.clone()
        dist.all_reduce(want, op=OPS[op], group=gloo)
    work = dist.all_reduce(x, op=OPS[op], async_op=async_op)
    if async_op:
        assert work.wait()
        assert work.is_completed() and work.is_success()
    assert torch.equal(x, want)


@pytest.mark.parametrize("dtype", (torch.float32, torch.float64, torch.bfloat16))
def test_all_reduce_avg(groups, dtype):
    _, gloo = groups
    x = rand(1000, seed=dist.get_rank() + 1, dtype=dtype)
    want = (gathered(x, gloo).sum(0).to(dtype) / dist.get_world_size()).to(dtype)
    dist.all_reduce(x, op=dist.ReduceOp.AVG)
    assert torch.equal(x, want)


@pytest.mark.parametrize("dtype", DTYPES)
def test_broadcast_every_root(groups, dtype):
    _, gloo = groups
    for root in range(dist.get_world_size()):
        x = rand((5, 1001), seed=10 * dist.get_rank() + root, dtype=dtype)
        want = gathered(x, gloo)[root].to(dtype)
        w = dist.broadcast(x, src=root, async_op=root % 2 == 1)
        if w is not None:
            w.wait()
        assert torch.equal(x, want), f"root {root}"


@pytest.mark.parametrize("dtype", DTYPES)
def test_all_gather_list_and_into_tensor(groups, dtype):
    _, gloo = groups
    p, r = dist.get_world_size(), dist.get_rank()
    x = rand((4, 33), seed=r + 3, dtype=dtype)
    want = gathered(x, gloo).to(dtype)
    outs = [torch.full_like(x, 99) for _ in range(p)]
    dist.all_gather(outs, x)
    assert torch.equal(torch.stack(outs), want)
    flat = torch.empty((p * 4, 33), dtype=dtype)
    dist.all_gather_into_tensor(flat, x)
    assert torch.equal(flat.view(p, 4, 33), want)
    # in place: the input is this rank's block of the output
    inplace = torch.zeros((p, 4, 33), dtype=dtype)
    inplace[r].copy_(x)
    dist.all_gather_into_tensor(inplace, inplace[r], async_op=True).wait()
    assert torch.equal(inplace, want)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", OPS)
def test_reduce_scatter_list_and_tensor(groups, dtype, op):
    _, gloo = groups
    p, r = dist.get_world_size(), dist.get_rank()
    x = rand((p, 301), seed=r + 11, dtype=dtype)
    want = reduce(gathered(x, gloo), op)[r].to(dtype)
    out = torch.full((301,), 99, dtype=dtype)
    dist.reduce_scatter_tensor(out, x, op=OPS[op])
    assert torch.equal(out, want)
    out2 = torch.full((301,), 99, dtype=dtype)
    dist.reduce_scatter(out2, list(x.unbind(0)), op=OPS[op], async_op=True).wait()
    assert torch.equal(out2, want)


@pytest.mark.parametrize("dtype", DTYPES)
def test_all_to_all_single_equal_and_split(groups, dtype):
    _, gloo = groups
    p, r = dist.get_world_size(), dist.get_rank()
    x = rand((p * 3, 17), seed=r + 5, dtype=dtype)
    out = torch.empty_like(x)
    dist.all_to_all_single(out, x)
    everyone = gathered(x, gloo).to(dtype)  # [p, p*3, 17]
    want = torch.cat([everyone[s, 3 * r:3 * r + 3] for s in range(p)])
    assert torch.equal(out, want)
    if dtype != torch.bfloat16:  # gloo's own all_to_all_single agrees
        ref = torch.empty_like(x)
        dist.all_to_all_single(ref, x, group=gloo)
        assert torch.equal(ref, want)
    # uneven splits: rank s sends (s + d) % 3 rows to rank d (some zero)
    rows = lambda s, d: (s + d) % 3  # noqa: E731
    send = [rows(r, d) for d in range(p)]
    recv = [rows(s, r) for s in range(p)]
    y = rand((sum(send), 17), seed=r + 50, dtype=dtype)
    got = torch.full((sum(recv), 17), 99, dtype=dtype)
    dist.all_to_all_single(got, y, recv, send, async_op=True).wait()
    ys = [rand((sum(rows(s, d) for d in range(p)), 17), seed=s + 50, dtype=dtype) for s in range(p)]
    want = torch.cat([ys[s][sum(rows(s, d) for d in range(r)):][:rows(s, r)] for s in range(p)])
    assert torch.equal(got, want)


def test_all_to_all_list(groups):
    p, r = dist.get_world_size(), dist.get_rank()
    ins = [torch.full((d + 1, 2), float(10 * r + d)) for d in range(p)]
    outs = [torch.empty((r + 1, 2)) for _ in range(p)]
    dist.all_to_all(outs, ins)
    for s in range(p):
        assert torch.equal(outs[s], torch.full((r + 1, 2), float(10 * s + r)))


def test_barrier_and_outstanding_requests_out_of_order(groups):
    dist.barrier()
    xs = [rand(100 * (i + 1), seed=dist.get_rank() + i, dtype=torch.float32) for i in range(4)]
    wants = []
    for x in xs:
        w = x.clone()
        dist.all_reduce(w, group=groups[1])
        wants.append(w)
    works = [dist.all_reduce(x, async_op=True) for x in xs]
    works.append(dist.barrier(async_op=True))
    for i in (4, 2, 0, 3, 1):
        works[i].wait()
    for x, w in zip(xs, wants):
        assert torch.equal(x, w)


def test_work_futures_complete_on_their_own(groups):
    """get_future(): completes without wait(), with the outputs; then() callbacks see them; a
    future taken after completion is done at once; futures of several outstanding calls may
    complete in any order while the caller posts more work (the DDP comm-hook pattern)."""
    p = dist.get_world_size()
    xs = [torch.full((1000 * (i + 1),), float(dist.get_rank() + i)) for i in range(3)]
    works = [dist.all_reduce(x, async_op=True) for x in xs]
    futs = [w.get_future() for w in works]
    doubled = futs[1].then(lambda f: f.value()[0] * 2)
    y = torch.ones(77)
    dist.all_reduce(y)  # more work posted while the futures' threads wait
    assert torch.equal(y, torch.full((77,), float(p)))
    for i in (2, 0, 1):
        (out,) = futs[i].wait()
        assert out is xs[i]
        assert torch.equal(out, torch.full_like(out, float(sum(r + i for r in range(p)))))
        assert works[i].is_completed() and works[i].is_success()
    assert torch.equal(doubled.wait(), 2 * xs[1])
    late = works[0].get_future()
    assert late.done() and late.wait()[0] is xs[0]


def test_subgroup_of_even_ranks(groups):
    p, r = dist.get_world_size(), dist.get_rank()
    ranks = list(range(0, p, 2))
    sub = dist.new_group(ranks, backend="tilecomm")  # every rank calls new_group (torch's rule)
    sub_gloo = dist.new_group(ranks, backend="gloo")
    if r in ranks:
        assert dist.get_world_size(sub) == len(ranks) and dist.get_rank(sub) == r // 2
        x = rand(513, seed=r, dtype=torch.int64)
        want = x.clone()
        dist.all_reduce(want, group=sub_gloo)
        dist.all_reduce(x, group=sub)
        assert torch.equal(x, want)
        b = torch.full((7,), float(r))
        dist.broadcast(b, src=ranks[-1], group=sub)
        assert torch.equal(b, torch.full((7,), float(ranks[-1])))
    dist.barrier()


def _still_in_step():
    x = torch.ones(3)
    dist.all_reduce(x)
    assert torch.equal(x, torch.full((3,), float(dist.get_world_size())))


def test_bad_tensors_raise_before_communicating(groups):
    p = dist.get_world_size()
    with pytest.raises(TypeError, match=r"all_reduce: tensor has dtype torch.float16"):
        dist.all_reduce(torch.ones(4, dtype=torch.float16))
    if isinstance(groups[0], tilecomm.torch.PyProcessGroupTilecomm):
        with pytest.raises(ValueError, match=r"all_reduce: tensor must be a CPU tensor, got device meta"):
            dist.all_reduce(torch.ones(4, device="meta"))
    else:  # torch's C++ dispatcher (c10d::allreduce_ has CPU and CUDA kernels only) refuses it
        with pytest.raises(NotImplementedError, match=r"c10d::allreduce_' with arguments from the '\w*Meta' backend"):
            dist.all_reduce(torch.ones(4, device="meta"))
    with pytest.raises(ValueError, match=r"broadcast: tensor must be contiguous"):
        dist.broadcast(torch.ones(4, 6)[:, ::2], src=0)
    with pytest.raises(ValueError, match=r"all_gather_into_tensor: output has 5 elements"):
        dist.all_gather_into_tensor(torch.empty(5), torch.ones(4))
    with pytest.raises(ValueError, match=r"reduce_scatter_tensor: input has"):
        dist.reduce_scatter_tensor(torch.empty(2), torch.ones(2 * p + 1))
    with pytest.raises(ValueError, match=r"input_split_sizes"):
        dist.all_to_all_single(torch.empty(p), torch.ones(p), [1] * p, [p + 1] + [0] * (p - 1))
    with pytest.raises(ValueError, match=r"not supported by the tilecomm backend"):
        dist.all_reduce(torch.ones(2), op=dist.ReduceOp.PRODUCT)
    with pytest.raises(TypeError, match=r"avg of torch.int32"):
        dist.all_reduce(torch.ones(2, dtype=torch.int32), op=dist.ReduceOp.AVG)
    _still_in_step()


@pytest.mark.parametrize("call", ["reduce", "gather", "scatter", "send", "recv"])
def test_unsupported_operations_name_themselves_and_gloo(groups, call):
    p, r = dist.get_world_size(), dist.get_rank()
    if call in ("send", "recv") and p == 1:
        pytest.skip("torch refuses send/recv to oneself before asking the backend")
    t = torch.ones(2)
    fn = {
        "reduce": lambda: dist.reduce(t, dst=0),
        "gather": lambda: dist.gather(t, [torch.ones(2)] * dist.get_world_size() if dist.get_rank() == 0 else None, dst=0),
        "scatter": lambda: dist.scatter(t, [torch.ones(2)] * dist.get_world_size() if dist.get_rank() == 0 else None, src=0),
        "send": lambda: dist.send(t, dst=(r + 1) % p),
        "recv": lambda: dist.recv(t, src=(r + 1) % p),
    }[call]
    with pytest.raises(RuntimeError, match=rf"tilecomm backend does not provide {call}; .*gloo"):
        fn()
    _still_in_step()


def test_blocking_callers_block_and_async_callers_post(groups, monkeypatch):
    """A torch.distributed call with async_op=False runs tilecomm's blocking call; async_op=True
    and a direct call on the group post the non-blocking one (counted by the C++ group; the
    Python group's calls to tilecomm are observed)."""
    pg = groups[0]
    x = torch.ones(3)
    if isinstance(pg, tilecomm.torch.PyProcessGroupTilecomm):
        calls = []
        for name in ("allreduce", "iallreduce", "ibarrier"):
            real = getattr(tilecomm, name)
            monkeypatch.setattr(tilecomm, name,
                                lambda *a, _n=name, _r=real, **k: calls.append(_n) or _r(*a, **k))
        dist.all_reduce(x)
        dist.all_reduce(x, async_op=True).wait()
        dist.barrier(async_op=True).wait()
        assert calls == ["allreduce", "iallreduce", "ibarrier"]
    else:
        blocking, posted = pg._calls
        dist.all_reduce(x)
        assert pg._calls == (blocking + 1, posted)
        dist.all_reduce(x, async_op=True).wait()
        assert pg._calls == (blocking + 1, posted + 1)
        dist.barrier(async_op=True).wait()
        dist.barrier()
        assert pg._calls == (blocking + 2, posted + 2)
        pg.allreduce([torch.zeros(1)]).wait()  # a direct call: torch does not wait for it
        assert pg._calls == (blocking + 2, posted + 3)
    assert torch.equal(x, torch.full((3,), float(dist.get_world_size() ** 2)))


def test_cpp_group_is_the_default_when_built(groups):
    pg = groups[0]
    if tilecomm.torch.ProcessGroupTilecomm is tilecomm.torch.PyProcessGroupTilecomm:
        pytest.skip("tilecomm._torch_pg was not built (no libtorch-dev): the Python group only")
    assert type(pg).__module__ == "tilecomm._torch_pg"
    assert repr(pg) == f"ProcessGroupTilecomm(rank={dist.get_rank()}, size={dist.get_world_size()})"
    # .comm: a tilecomm.Communicator on the group's own communicator, usable beside the group
    comm = pg.comm
    assert isinstance(comm, tilecomm.Communicator)
    assert (comm.rank, comm.size) == (dist.get_rank(), dist.get_world_size())
    a = np.full(5, dist.get_rank() + 1, dtype=np.int64)
    t = torch.full((5,), dist.get_rank() + 1, dtype=torch.int64)
    w = dist.all_reduce(t, async_op=True)
    tilecomm.allreduce(comm, a, a)  # the same communicator: runs after the posted all_reduce
    w.wait()
    p = dist.get_world_size()
    assert (a == p * (p + 1) // 2).all() and torch.equal(t, torch.from_numpy(a))


@pytest.mark.parametrize("impl", ["cpp", "python"])
def test_both_implementations_on_one_group(groups, impl):
    """set_implementation picks the class of groups made afterwards; both give the same results
    and Work semantics: wait() after completion, is_completed() reaching True without wait(),
    result(), a Work dropped before completion still completing its call."""
    if impl == "cpp" and tilecomm.torch.ProcessGroupTilecomm is tilecomm.torch.PyProcessGroupTilecomm:
        pytest.skip("tilecomm._torch_pg was not built")
    previous = tilecomm.torch.set_implementation(impl)
    try:
        pg = dist.new_group(backend="tilecomm")
    finally:
        tilecomm.torch.set_implementation(previous)
    want = tilecomm.torch.ProcessGroupTilecomm if impl == "cpp" else tilecomm.torch.PyProcessGroupTilecomm
    assert type(pg) is want
    p, r = dist.get_world_size(), dist.get_rank()
    x = torch.full((1000,), float(r + 1))
    work = dist.all_reduce(x, group=pg, async_op=True)
    spins = 0
    while not work.is_completed():  # completes on its own (the progress thread), no wait() needed
        spins += 1
        time.sleep(min(1e-3, 1e-6 * spins))
        assert spins < 100000, "is_completed() never became True"
    assert work.is_success()
    if impl == "python":  # torch 1.13 cannot convert a C++ Work's exception() (an exception_ptr)
        assert work.exception() is None
    assert work.wait() and work.wait()  # waiting again after completion returns at once
    (out,) = work.result()
    assert out is x and torch.equal(x, torch.full((1000,), float(p * (p + 1) // 2)))
    # dropped before completion: the Work's end waits for the call, and the result lands
    y = torch.full((100000,), float(r))
    dist.all_reduce(y, group=pg, async_op=True)
    gc.collect()
    assert torch.equal(y, torch.full((100000,), float(p * (p - 1) // 2)))
    # errors before communication, the same from both
    with pytest.raises(TypeError, match=r"all_gather_into_tensor: tensors have dtypes torch.float64 and torch.float32"):
        dist.all_gather_into_tensor(torch.empty(p, dtype=torch.float64), torch.ones(1), group=pg)
    with pytest.raises(ValueError, match=r"all_to_all: needs"):
        dist.all_to_all([torch.ones(1)] * (p + 1), [torch.ones(1)] * (p + 1), group=pg)
    with pytest.raises(ValueError, match=r"all_gather: output\[0\] has 2 elements, input has 1"):
        dist.all_gather([torch.ones(2)] * p, torch.ones(1), group=pg)
    with pytest.raises(ValueError, match=r"all_to_all_single: without split sizes"):  # async too
        dist.all_to_all_single(torch.empty(2 * p), torch.ones(p), group=pg, async_op=True)
    with pytest.raises(TypeError, match=r"reduce_scatter_tensor: input has dtype torch.float16"):
        dist.reduce_scatter_tensor(torch.empty(1), torch.ones(p, dtype=torch.float16), group=pg,
                                   async_op=True)
    with pytest.raises(RuntimeError, match=r"tilecomm backend does not provide gather"):
        dist.gather(torch.ones(1), [torch.ones(1)] * p if r == 0 else None, dst=0, group=pg)
    z = torch.ones(2, dtype=torch.bfloat16)
    dist.all_reduce(z, group=pg, op=dist.ReduceOp.AVG)
    assert torch.equal(z, torch.ones(2, dtype=torch.bfloat16))
    dist.barrier(group=pg)
