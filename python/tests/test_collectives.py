"""Collectives against mpi4py references (exact small-integer data), every algorithm, in place,
and the argument errors: wrong dtype, non-contiguous, read-only, wrong size -> the right exception."""
import numpy as np
import pytest
from mpi4py import MPI

import tilecomm
from conftest import DTYPES, small_ints

MPI_OPS = {"sum": MPI.SUM, "max": MPI.MAX, "min": MPI.MIN}


def run_or_skip_declined(fn, *args, **kwargs):
    """Runs fn; an algorithm that declines these arguments (on every rank) returns None."""
    try:
        return fn(*args, **kwargs)
    except tilecomm.Error as e:
        if e.code == "NotSupported":
            return None
        raise


def test_communicator_matches_mpi(comm, world):
    assert comm.rank == world.rank and comm.size == world.size
    assert 1 <= comm.num_nodes <= comm.size and 0 <= comm.node < comm.num_nodes
    assert 0 <= comm.local_rank < comm.local_size
    assert MPI.Query_thread() == MPI.THREAD_MULTIPLE
    comm.barrier()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", ["sum", "max", "min"])
def test_allreduce_new_given_and_in_place(comm, world, dtype, op):
    send = small_ints((3, 1001), seed=comm.rank + 1, r=50, dtype=dtype)
    ref = np.empty_like(send)
    world.Allreduce(send, ref, op=MPI_OPS[op])
    out = tilecomm.allreduce(comm, send, op=op)
    assert out.shape == send.shape and out.dtype == send.dtype
    np.testing.assert_array_equal(out, ref)
    given = np.full_like(send, -9)
    assert tilecomm.allreduce(comm, send, given, op) is given
    np.testing.assert_array_equal(given, ref)
    inplace = send.copy()
    tilecomm.allreduce(comm, inplace, inplace, op=op)
    np.testing.assert_array_equal(inplace, ref)


@pytest.mark.parametrize("algorithm", tilecomm.algorithm_names("allreduce"))
def test_allreduce_every_algorithm(comm, world, algorithm):
    for count in (1, 7, 4099, (1 << 17) + 3):
        send = small_ints(count, seed=10 * comm.rank + count)
        ref = np.empty_like(send)
        world.Allreduce(send, ref)
        out = run_or_skip_declined(tilecomm.allreduce, comm, send, algorithm=algorithm)
        if out is not None:
            np.testing.assert_array_equal(out, ref, err_msg=f"{algorithm} count {count}")


@pytest.mark.parametrize("algorithm", [""] + tilecomm.algorithm_names("reduce_scatter"))
def test_reduce_scatter(comm, world, algorithm):
    n = 1001
    send = small_ints((comm.size, n), seed=comm.rank + 3, dtype=np.float64)
    ref = np.empty(n, np.float64)
    world.Reduce_scatter_block(send, ref, op=MPI.SUM)
    out = run_or_skip_declined(tilecomm.reduce_scatter, comm, send, algorithm=algorithm)
    if out is None:
        return
    assert out.shape == (n,)
    np.testing.assert_array_equal(out, ref)
    # in place: recv is this rank's block of send
    inplace = send.copy()
    tilecomm.reduce_scatter(comm, inplace, inplace[comm.rank], algorithm=algorithm)
    np.testing.assert_array_equal(inplace[comm.rank], ref)


@pytest.mark.parametrize("algorithm", [""] + tilecomm.algorithm_names("allgather"))
def test_allgather(comm, world, algorithm):
    send = small_ints((4, 33), seed=comm.rank + 5, dtype=np.int32)
    ref = np.empty((comm.size, 4, 33), np.int32)
    world.Allgather(send, ref)
    out = run_or_skip_declined(tilecomm.allgather, comm, send, algorithm=algorithm)
    if out is None:
        return
    assert out.shape == (comm.size, 4, 33)
    np.testing.assert_array_equal(out, ref)
    # in place: send is this rank's block of recv
    recv = np.zeros_like(ref)
    recv[comm.rank] = send
    tilecomm.allgather(comm, recv[comm.rank], recv, algorithm=algorithm)
    np.testing.assert_array_equal(recv, ref)


@pytest.mark.parametrize("algorithm", [""] + tilecomm.algorithm_names("alltoall"))
def test_alltoall(comm, world, algorithm):
    send = small_ints((comm.size, 257), seed=comm.rank + 7, dtype=np.int64)
    ref = np.empty_like(send)
    world.Alltoall(send, ref)
    out = run_or_skip_declined(tilecomm.alltoall, comm, send, algorithm=algorithm)
    if out is None:
        return
    np.testing.assert_array_equal(out, ref)
    inplace = send.copy()
    tilecomm.alltoall(comm, inplace, inplace, algorithm=algorithm)
    np.testing.assert_array_equal(inplace, ref)


@pytest.mark.parametrize("algorithm", [""] + tilecomm.algorithm_names("alltoallv"))
def test_alltoallv(comm, world, algorithm):
    p, me = comm.size, comm.rank
    send_counts = [(me * 5 + q * 3) % 7 * 11 for q in range(p)]  # uneven, with zeros
    recv_counts = [(q * 5 + me * 3) % 7 * 11 for q in range(p)]
    send = small_ints(sum(send_counts), seed=me + 11, dtype=np.float32)
    ref = np.empty(sum(recv_counts), np.float32)
    sd = np.concatenate(([0], np.cumsum(send_counts)[:-1])).tolist()
    rd = np.concatenate(([0], np.cumsum(recv_counts)[:-1])).tolist()
    world.Alltoallv([send, (send_counts, sd)], [ref, (recv_counts, rd)])
    out = run_or_skip_declined(tilecomm.alltoallv, comm, send, send_counts, algorithm=algorithm)
    if out is None:
        return
    np.testing.assert_array_equal(out, ref)  # recv_counts learnt by the extra exchange
    given = np.full(sum(recv_counts) + 5, -1, np.float32)
    tilecomm.alltoallv(comm, send, send_counts, given, recv_counts, algorithm=algorithm)
    np.testing.assert_array_equal(given[: ref.size], ref)
    assert (given[ref.size:] == -1).all()
    # explicit displacements: blocks in reverse order with gaps
    cap = sum(recv_counts) + 3 * p
    rdis, at = [0] * p, 0
    for q in reversed(range(p)):
        rdis[q] = at
        at += recv_counts[q] + 3
    spaced = tilecomm.alltoallv(comm, send, send_counts, np.zeros(cap, np.float32), recv_counts,
                                None, rdis, algorithm=algorithm)
    for q in range(p):
        np.testing.assert_array_equal(spaced[rdis[q]: rdis[q] + recv_counts[q]],
                                      ref[rd[q]: rd[q] + recv_counts[q]])


def test_algorithm_names():
    for c in ("allreduce", "reduce_scatter", "allgather", "alltoall", "alltoallv", "broadcast"):
        names = tilecomm.algorithm_names(c)
        assert names and all(isinstance(n, str) for n in names)
    assert tilecomm.algorithm_names("broadcast") == ["mpi", "shm", "hierarchical"]
    with pytest.raises(ValueError, match="not one of"):
        tilecomm.algorithm_names("gather")


@pytest.mark.parametrize("algorithm", [""] + tilecomm.algorithm_names("broadcast"))
def test_broadcast_every_root(comm, world, algorithm):
    for root in range(comm.size):
        buf = small_ints((3, 1001), seed=comm.rank + 10 * root, dtype=np.int64)
        want = world.bcast(buf if comm.rank == root else None, root=root)
        out = run_or_skip_declined(tilecomm.broadcast, comm, buf, root, algorithm=algorithm)
        if out is None:
            return
        assert out is buf
        np.testing.assert_array_equal(buf, want)
    with pytest.raises(ValueError, match=r"root = %d is not a rank" % comm.size):
        tilecomm.broadcast(comm, buf, comm.size)


def test_nonblocking_calls_and_bfloat16(comm, world):
    a = small_ints(1000, seed=comm.rank, dtype=np.float32)
    want = np.empty_like(a)
    world.Allreduce(a, want)
    # bfloat16 as its bits (uint16): small integers are exact in bfloat16
    bits = (a.view(np.uint32) >> 16).astype(np.uint16)
    reqs = [tilecomm.iallreduce(comm, a), tilecomm.ibarrier(comm),
            tilecomm.iallreduce(comm, bits, dtype="bfloat16"),
            tilecomm.ibroadcast(comm, a.copy(), 0)]
    for i in (3, 1, 2, 0):
        reqs[i].wait()
    assert all(r.test() and r.done for r in reqs)
    np.testing.assert_array_equal(reqs[0].wait(), want)
    got = (reqs[2].wait().astype(np.uint32) << 16).view(np.float32)
    np.testing.assert_array_equal(got, want)
    assert reqs[1].wait() is None
    with pytest.raises(TypeError, match="dtype='bfloat16' needs a uint16 or int16 array"):
        tilecomm.iallreduce(comm, a, dtype="bfloat16")


# ---- errors: raised on every rank alike, before any communication ----

def test_wrong_dtype_is_type_error(comm):
    with pytest.raises(TypeError, match="float16"):
        tilecomm.allreduce(comm, np.ones(8, np.float16))
    with pytest.raises(TypeError, match="recv has dtype float64"):
        tilecomm.allreduce(comm, np.ones(8, np.float32), np.ones(8, np.float64))
    with pytest.raises(TypeError, match="native byte order"):
        tilecomm.allreduce(comm, np.ones(8, np.dtype(">f4")))
    with pytest.raises(TypeError, match="numpy.ndarray"):
        tilecomm.allreduce(comm, [1.0, 2.0])
    with pytest.raises(TypeError, match="numpy.ndarray"):
        tilecomm.allgather(comm, np.ones(2, np.int32), recv=[0] * (2 * comm.size))


def test_non_contiguous_is_value_error(comm):
    a = np.ones((8, 8), np.float32)
    with pytest.raises(ValueError, match="C-contiguous"):
        tilecomm.allreduce(comm, a.T)
    with pytest.raises(ValueError, match="C-contiguous"):
        tilecomm.allreduce(comm, a[:, 0])
    with pytest.raises(ValueError, match="recv must be C-contiguous"):
        tilecomm.allreduce(comm, a, np.ones((8, 16), np.float32)[:, ::2])


def test_read_only_or_wrong_size_recv_is_value_error(comm):
    send = np.ones(10, np.int64)
    ro = np.zeros(10, np.int64)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="writeable"):
        tilecomm.allreduce(comm, send, ro)
    with pytest.raises(ValueError, match="must hold 10 elements, got 9"):
        tilecomm.allreduce(comm, send, np.zeros(9, np.int64))
    with pytest.raises(ValueError, match="must hold"):
        tilecomm.allgather(comm, send, np.zeros(10 * comm.size + 1, np.int64))
    with pytest.raises(ValueError, match="send_counts must have"):
        tilecomm.alltoallv(comm, send, [1] * (comm.size + 1))
    with pytest.raises(ValueError, match="must not be negative"):
        tilecomm.alltoallv(comm, send, [-1] * comm.size)
    if comm.size > 1:
        with pytest.raises(ValueError, match="not a multiple"):
            tilecomm.alltoall(comm, np.ones(comm.size + 1, np.float32))
        with pytest.raises(ValueError, match="not a multiple"):
            tilecomm.reduce_scatter(comm, np.ones(comm.size + 1, np.float32))


def test_bad_op_and_algorithm(comm):
    with pytest.raises(ValueError, match="op 'prod'"):
        tilecomm.allreduce(comm, np.ones(4, np.float32), op="prod")
    with pytest.raises(tilecomm.Error) as e:
        tilecomm.allreduce(comm, np.ones(4, np.float32), algorithm="no_such_algorithm")
    assert e.value.code == "InvalidArgument"
    assert "no_such_algorithm" in str(e.value) and "no_such_algorithm" in e.value.message


def test_canonical_order_is_the_same_bits_for_every_algorithm(comm, world):
    """order="canonical": random floats give one set of bits whatever the algorithm; algorithms
    that do not keep the order are refused by name before communicating."""
    rng = np.random.default_rng(100 + comm.rank)
    send = (rng.standard_normal(5003) * 2.0 ** rng.integers(-10, 10, 5003)).astype(np.float32)
    results = {}
    for algorithm in [""] + tilecomm.algorithm_names("allreduce"):
        try:
            results[algorithm] = tilecomm.allreduce(comm, send, algorithm=algorithm,
                                                    order="canonical")
        except tilecomm.Error as e:
            assert algorithm != "", e.message
            if algorithm in ("one_shot", "two_shot", "hierarchical"):
                assert e.code == "NotSupported", e.message
            else:
                assert e.code == "InvalidArgument" and f"'{algorithm}'" in e.message, e.message
    assert "" in results and len(results) >= 2
    for algorithm, out in results.items():
        np.testing.assert_array_equal(out, results[""], err_msg=algorithm or "auto")
    with pytest.raises(tilecomm.Error, match="order = 'sorted'") as e:
        tilecomm.allreduce(comm, send, order="sorted")
    assert e.value.code == "InvalidArgument"


def test_overlap_without_being_in_place_is_tilecomm_error(comm):
    buf = np.ones(64, np.float32)
    with pytest.raises(tilecomm.Error, match="overlap") as e:
        tilecomm.allreduce(comm, buf[:32], buf[1:33])
    assert e.value.code == "InvalidArgument"


def test_error_class():
    assert issubclass(tilecomm.Error, RuntimeError)
    assert "Mismatch" in tilecomm.ERROR_CODES and "Timeout" in tilecomm.ERROR_CODES


def test_communicator_argument_and_lifetime(world):
    with pytest.raises(TypeError, match="mpi4py.MPI.Comm"):
        tilecomm.Communicator(42)
    with tilecomm.Communicator(world, node_size=1) as c:  # every rank its own pretend node
        assert c.num_nodes == c.size and c.local_size == 1
        x = np.arange(5, dtype=np.int64) + c.rank
        np.testing.assert_array_equal(tilecomm.allreduce(c, x),
                                      np.arange(5) * c.size + c.size * (c.size - 1) // 2)
    assert c.closed
    with pytest.raises(ValueError, match="closed"):
        tilecomm.allreduce(c, x)
    with pytest.raises(ValueError, match="closed"):
        c.rank


def test_device_arguments():
    with tilecomm.Device(cus=1, slots=3, lds_bytes=1 << 14) as d:
        assert (d.num_cus, d.wg_slots_per_cu, d.lds_bytes_per_cu) == (1, 3, 1 << 14)
        d.synchronize()
    with pytest.raises(ValueError, match="closed"):
        d.num_cus
    with pytest.raises(ValueError, match=">= 0"):
        tilecomm.Device(cus=-1)
