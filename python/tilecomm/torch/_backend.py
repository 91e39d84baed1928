"""The "tilecomm" torch.distributed backend: a process group on a tilecomm.Communicator.

Two implementations with the same operations, checks and messages:
 - C++ (tilecomm._torch_pg, python/src/torch_pg*.cpp): a c10d::ProcessGroup subclass against
   libtorch, built when Torch's CMake config and a torch the interpreter imports are found. It is
   ProcessGroupTilecomm, and the default.
 - Python (PyProcessGroupTilecomm, below): a Python subclass of torch's ProcessGroup trampoline
   (torch 1.13's ProcessGroup(rank, size) can be subclassed, and every torch.distributed function
   calls the group's methods from Python), calling tilecomm's collectives on the numpy arrays that
   share the tensors' memory (bfloat16 as its 16 bits, dtype="bfloat16"). The fallback when the
   C++ module was not built; set_implementation("python") selects it for groups made afterwards.
Each method checks its tensors (CPU, contiguous, a supported dtype, matching sizes) before any
communication.

Communicator: the world group is MPI_COMM_WORLD (its rank and size must equal torch's); a group
from ``dist.new_group(ranks)`` is ``MPI_Comm_create_group`` over those ranks of MPI_COMM_WORLD
(collective over the members only: torch calls the backend's constructor on members only, so
MPI_Comm_split, which every rank must call, cannot be used). Each group owns one
tilecomm.Communicator (its own shared segment); the store torch passes is not used.
"""
import os
import socket
import sys
import threading
import warnings

import torch
import torch.distributed as dist
from mpi4py import MPI
from torch._C._distributed_c10d import ProcessGroup, ReduceOp, Work

import tilecomm

BACKEND = "tilecomm"

# torch dtype -> the dtype argument of tilecomm's calls ("" = the numpy array's own).
_DTYPES = {
    torch.float32: "",
    torch.float64: "",
    torch.int32: "",
    torch.int64: "",
    torch.bfloat16: "bfloat16",
}
_DTYPE_NAMES = "float32, float64, int32, int64, bfloat16"

_OPS = {
    ReduceOp.RedOpType.SUM: "sum",
    ReduceOp.RedOpType.MAX: "max",
    ReduceOp.RedOpType.MIN: "min",
    ReduceOp.RedOpType.AVG: "avg",
}

# What tilecomm does not provide, and who does for CPU tensors (Debian's torch 1.13 has no "mpi"
# backend built in; "nccl" and "ucc" are for GPUs).
_ELSEWHERE = {
    "reduce": "gloo",
    "gather": "gloo",
    "scatter": "gloo",
    "send": "gloo",
    "recv": "gloo",
    "recv_anysource": "gloo",
    "allreduce_coalesced": "gloo",
    "allgather_coalesced": "gloo",
    "monitored_barrier": "gloo",
}


def _unsupported(op):
    return RuntimeError(
        f"the tilecomm backend does not provide {op}; for CPU tensors the {_ELSEWHERE[op]} backend "
        f"does: run it on a group made with dist.new_group(backend='gloo')"
    )


def _check(t, where):
    """TypeError / ValueError naming `where` unless t is a CPU, contiguous tensor of a supported
    dtype. Called before any communication."""
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{where} must be a torch.Tensor, got {type(t).__name__}")
    if t.device.type != "cpu":
        raise ValueError(f"{where} must be a CPU tensor, got device {t.device}")
    if t.dtype not in _DTYPES:
        raise TypeError(f"{where} has dtype {t.dtype}; the tilecomm backend supports {_DTYPE_NAMES}")
    if not t.is_contiguous():
        raise ValueError(f"{where} must be contiguous (tensor.contiguous() makes a copy)")


def _same_dtype(a, b, where):
    if a.dtype != b.dtype:
        raise TypeError(f"{where}: tensors have dtypes {a.dtype} and {b.dtype}; they must match")


def _np(t):
    """The numpy array sharing t's memory (bfloat16: its bits as int16), and tilecomm's dtype."""
    t = t.detach()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy(), "bfloat16"
    return t.numpy(), ""


def _op_name(opts, where):
    op = getattr(opts, "reduceOp", opts)  # AllreduceOptions / ReduceScatterOptions, or a ReduceOp
    kind = getattr(op, "op", op)
    name = _OPS.get(kind)
    if name is None:
        raise ValueError(
            f"{where}: reduce op {kind} is not supported by the tilecomm backend "
            f"(supported: sum, max, min, avg; gloo provides product and the bitwise ops)"
        )
    return name


class _Work(Work):
    """A torch Work backed by a tilecomm.Request (or complete at birth for blocking calls).
    wait() waits for the request (GIL released), then runs `finish` (copies out of staging
    buffers, the division of avg) once; the tensors stay referenced until then. Completion is
    guarded by a lock, so wait() may race the thread behind get_future()."""

    def __init__(self, request=None, finish=None, outputs=(), keep=()):
        super().__init__()
        self._lock = threading.Lock()
        self._request = request
        self._finish = finish
        self._outputs = list(outputs)
        self._keep = keep
        self._done = False
        self._error = None
        if request is None:
            self._complete()

    def _complete(self):
        with self._lock:
            self._complete_locked()

    def _complete_locked(self):
        if self._done:
            return
        try:
            if self._request is not None:
                self._request.wait()
            if self._finish is not None:
                self._finish()
        except Exception as e:  # noqa: BLE001 -- kept for exception(), then raised
            self._error = e
            raise
        finally:
            self._done = True
            self._request = self._finish = self._keep = None

    def wait(self, timeout=None):
        if self._error is not None:
            raise self._error
        self._complete()
        return True

    def is_completed(self):
        if self._done:
            return True
        if not self._lock.acquire(blocking=False):
            return False  # the future's thread is completing it
        try:
            if self._done or self._request.test():
                self._complete_locked()
                return True
            return False
        finally:
            self._lock.release()

    def is_success(self):
        return self._done and self._error is None

    def exception(self):
        return self._error

    def result(self):
        self.wait()
        return self._outputs

    def synchronize(self):
        self.wait()

    def get_future(self):
        """A torch.futures.Future completed with the output tensors (as result()) once the
        operation has finished, or with its error. Like gloo's, it completes on its own: a thread
        waits for the request (the GIL released) and runs the completion, so callbacks chained
        with then() run on that thread. No progress is needed from the caller."""
        fut = torch.futures.Future()

        def settle():
            try:
                self._complete()
            except Exception as e:  # noqa: BLE001 -- handed to the future
                fut.set_exception(e)
            else:
                fut.set_result(self._outputs)

        if self._done:
            if self._error is not None:
                fut.set_exception(self._error)
            else:
                fut.set_result(self._outputs)
        else:
            threading.Thread(target=settle, name="tilecomm-work-future", daemon=True).start()
        return fut


def _world_comm(group_rank, group_size):
    world = MPI.COMM_WORLD
    if (group_rank, group_size) != (world.rank, world.size):
        raise RuntimeError(
            f"tilecomm backend: torch's rank {group_rank} of {group_size} differs from MPI's "
            f"(rank {world.rank} of {world.size}). Start under mpirun and pass MPI's rank and size "
            f"(tilecomm.torch.mpi_rendezvous() gives them)."
        )
    return world


def _group_comm(ranks):
    world = MPI.COMM_WORLD
    default = dist.distributed_c10d._get_default_group()
    if default.rank() != world.rank or default.size() != world.size:
        raise RuntimeError(
            "tilecomm backend: the default group's ranks are not MPI_COMM_WORLD's; subgroups "
            "need torch's global ranks to be MPI's"
        )
    ranks = sorted(int(r) for r in ranks)  # torch numbers group ranks in ascending global rank
    return world.Create_group(world.Get_group().Incl(ranks))


def _create(backend_opts, pg_options):
    """The creator registered with torch (extended API: it receives the group's global ranks)."""
    ranks = list(backend_opts.global_ranks_in_group)
    rank, size = backend_opts.group_rank, backend_opts.group_size
    mpi = _world_comm(rank, size) if not ranks else _group_comm(ranks)
    if (mpi.rank, mpi.size) != (rank, size):
        raise RuntimeError(
            f"tilecomm backend: group rank {rank} of {size} but MPI's group has rank {mpi.rank} "
            f"of {mpi.size}"
        )
    comm = tilecomm.Communicator(mpi)
    if _implementation == "cpp":
        return CppProcessGroupTilecomm(comm._state())
    return PyProcessGroupTilecomm(comm, mpi)


def mpi_rendezvous():
    """Arguments for dist.init_process_group under mpirun: MPI's rank and world size, and a
    tcp:// address on rank 0 (MASTER_ADDR when set, as torch's env:// uses it; else 127.0.0.1
    when every rank is on one host, so nothing leaves the machine; else rank 0's host name) with a
    port rank 0 found free. Collective."""
    world = MPI.COMM_WORLD
    hosts = world.allgather(MPI.Get_processor_name())
    addr = os.environ.get("MASTER_ADDR") or (
        "127.0.0.1" if len(set(hosts)) == 1 else socket.gethostbyname(hosts[0]))
    port = None
    if world.rank == 0:
        with socket.socket() as s:
            s.bind((addr, 0))
            port = s.getsockname()[1]
    port = world.bcast(port, root=0)
    return {"init_method": f"tcp://{addr}:{port}", "rank": world.rank, "world_size": world.size}


class PyProcessGroupTilecomm(ProcessGroup):
    """torch.distributed process group on a tilecomm.Communicator, in Python (the fallback of the
    C++ ProcessGroupTilecomm, with the same behaviour). Made by torch through the
    registered backend ("tilecomm"), not by hand. Every collective is posted on the communicator
    in call order; async_op=True returns a Work whose wait() completes it."""

    def __init__(self, comm, mpi_comm):
        super().__init__(comm.rank, comm.size)
        self.comm = comm
        self.mpi_comm = mpi_comm

    def getBackendName(self):  # noqa: N802 -- torch's name
        return BACKEND

    def __repr__(self):
        return f"PyProcessGroupTilecomm(rank={self.comm.rank}, size={self.comm.size})"

    # -- helpers ----------------------------------------------------------------------------

    def _single(self, tensors, where):
        if not isinstance(tensors, (list, tuple)) or len(tensors) != 1:
            raise ValueError(f"{where}: the tilecomm backend takes one tensor per process")
        _check(tensors[0], f"{where}: tensor")
        return tensors[0]

    def _post(self, fn, *args, finish=None, outputs=(), keep=(), **kwargs):
        """Runs tilecomm's fn, blocking, when a torch.distributed function called us with
        async_op=False (it waits at once anyway, and a blocking call skips the hand-off to the
        progress thread: 8 us instead of 56 us for 8 B on 2 ranks here); otherwise posts i<fn>
        and returns a Work whose wait() completes it. Either way in call order."""
        if _caller_blocks():
            getattr(tilecomm, fn)(self.comm, *args, **kwargs)
            return _Work(None, finish, outputs)
        request = getattr(tilecomm, "i" + fn)(self.comm, *args, **kwargs)
        return _Work(request, finish, outputs, keep)

    def _avg(self, tensor, op):
        if op != "avg":
            return op, None
        if not tensor.is_floating_point():
            raise TypeError(f"avg of {tensor.dtype} tensors is not defined; use sum")
        size = self.comm.size
        return "sum", (lambda: tensor.div_(size))

    # -- the collectives --------------------------------------------------------------------

    def allreduce(self, tensors, opts=None):
        where = "all_reduce"
        t = self._single(tensors, where)
        op, finish = self._avg(t, _op_name(opts if opts is not None else ReduceOp.SUM, where))
        a, dt = _np(t)
        return self._post("allreduce", a, a, op, dtype=dt, finish=finish, outputs=[t], keep=(t,))

    def broadcast(self, tensors, opts=None):
        where = "broadcast"
        t = self._single(tensors, where)
        root = opts.rootRank if opts is not None else 0
        if opts is not None and opts.rootTensor != 0:
            raise ValueError(f"{where}: root tensor {opts.rootTensor}: one tensor per process")
        if not 0 <= root < self.comm.size:
            raise ValueError(f"{where}: root {root} is not a rank of the group (size {self.comm.size})")
        a, dt = _np(t)
        return self._post("broadcast", a, root, dtype=dt, outputs=[t], keep=(t,))

    def _allgather_base(self, output, input, opts=None):  # noqa: A002 -- torch's name
        where = "all_gather_into_tensor"
        _check(output, f"{where}: output")
        _check(input, f"{where}: input")
        _same_dtype(output, input, where)
        if output.numel() != self.comm.size * input.numel():
            raise ValueError(
                f"{where}: output has {output.numel()} elements, expected group size "
                f"{self.comm.size} x input's {input.numel()}"
            )
        o, dt = _np(output)
        i, _ = _np(input)
        return self._post("allgather", i, o.reshape(-1), dtype=dt, outputs=[output],
                          keep=(output, input))

    def allgather(self, output_lists, inputs, opts=None):
        where = "all_gather"
        t = self._single(inputs, where)
        if len(output_lists) != 1 or len(output_lists[0]) != self.comm.size:
            raise ValueError(f"{where}: needs one list of {self.comm.size} output tensors")
        outs = output_lists[0]
        for k, o in enumerate(outs):
            _check(o, f"{where}: output[{k}]")
            _same_dtype(o, t, where)
            if o.numel() != t.numel():
                raise ValueError(
                    f"{where}: output[{k}] has {o.numel()} elements, input has {t.numel()}"
                )
        flat = torch.empty((self.comm.size,) + tuple(t.shape), dtype=t.dtype)
        f, dt = _np(flat)
        i, _ = _np(t)

        def finish():
            for k, o in enumerate(outs):
                o.copy_(flat[k].view(o.shape))

        return self._post("allgather", i, f, dtype=dt, finish=finish, outputs=outs,
                          keep=(flat, t))

    def _reduce_scatter_base(self, output, input, opts=None):  # noqa: A002
        where = "reduce_scatter_tensor"
        _check(output, f"{where}: output")
        _check(input, f"{where}: input")
        _same_dtype(output, input, where)
        if input.numel() != self.comm.size * output.numel():
            raise ValueError(
                f"{where}: input has {input.numel()} elements, expected group size "
                f"{self.comm.size} x output's {output.numel()}"
            )
        op, finish = self._avg(output, _op_name(opts if opts is not None else ReduceOp.SUM, where))
        o, dt = _np(output)
        i, _ = _np(input)
        return self._post("reduce_scatter", i.reshape(-1), o, op, dtype=dt, finish=finish,
                          outputs=[output], keep=(output, input))

    def reduce_scatter(self, outputs, input_lists, opts=None):
        where = "reduce_scatter"
        out = self._single(outputs, where)
        if len(input_lists) != 1 or len(input_lists[0]) != self.comm.size:
            raise ValueError(f"{where}: needs one list of {self.comm.size} input tensors")
        for k, t in enumerate(input_lists[0]):
            _check(t, f"{where}: input[{k}]")
            _same_dtype(out, t, where)
            if t.numel() != out.numel():
                raise ValueError(f"{where}: input[{k}] has {t.numel()} elements, output {out.numel()}")
        op, finish = self._avg(out, _op_name(opts if opts is not None else ReduceOp.SUM, where))
        flat = torch.cat([t.reshape(-1) for t in input_lists[0]])
        f, dt = _np(flat)
        o, _ = _np(out)
        return self._post("reduce_scatter", f, o.reshape(-1), op, dtype=dt, finish=finish,
                          outputs=[out], keep=(flat, out))

    def alltoall_base(self, output, input, output_split_sizes, input_split_sizes, opts=None):  # noqa: A002
        where = "all_to_all_single"
        _check(output, f"{where}: output")
        _check(input, f"{where}: input")
        _same_dtype(output, input, where)
        p = self.comm.size
        o, dt = _np(output)
        i, _ = _np(input)
        if not output_split_sizes and not input_split_sizes:
            if input.numel() != output.numel() or input.numel() % p:
                raise ValueError(
                    f"{where}: without split sizes input ({input.numel()} elements) and output "
                    f"({output.numel()}) must be equal and divisible by the group size {p}"
                )
            return self._post("alltoall", i.reshape(-1), o.reshape(-1), dtype=dt,
                              outputs=[output], keep=(output, input))
        send = _split_counts(input, input_split_sizes, p, f"{where}: input_split_sizes")
        recv = _split_counts(output, output_split_sizes, p, f"{where}: output_split_sizes")
        return self._post("alltoallv", i.reshape(-1), send, o.reshape(-1), recv, dtype=dt,
                          outputs=[output], keep=(output, input))

    def alltoall(self, outputs, inputs, opts=None):
        where = "all_to_all"
        p = self.comm.size
        if len(outputs) != p or len(inputs) != p:
            raise ValueError(f"{where}: needs {p} output and {p} input tensors (one per rank)")
        for k, t in enumerate(inputs):
            _check(t, f"{where}: input[{k}]")
        for k, t in enumerate(outputs):
            _check(t, f"{where}: output[{k}]")
            _same_dtype(t, inputs[0], where)
        for t in inputs:
            _same_dtype(t, inputs[0], where)
        send = torch.cat([t.reshape(-1) for t in inputs])
        recv = torch.empty(sum(t.numel() for t in outputs), dtype=inputs[0].dtype)
        s, dt = _np(send)
        r, _ = _np(recv)

        def finish():
            at = 0
            for t in outputs:
                t.copy_(recv[at:at + t.numel()].view(t.shape))
                at += t.numel()

        return self._post("alltoallv", s, [t.numel() for t in inputs], r,
                          [t.numel() for t in outputs], dtype=dt, finish=finish, outputs=outputs,
                          keep=(send, recv))

    def barrier(self, opts=None):
        if _caller_blocks(2):
            self.comm.barrier()
            return _Work()
        return _Work(tilecomm.ibarrier(self.comm))

    # -- what tilecomm does not provide -----------------------------------------------------

    def reduce(self, *args, **kwargs):
        raise _unsupported("reduce")

    def gather(self, *args, **kwargs):
        raise _unsupported("gather")

    def scatter(self, *args, **kwargs):
        raise _unsupported("scatter")

    def send(self, *args, **kwargs):
        raise _unsupported("send")

    def recv(self, *args, **kwargs):
        raise _unsupported("recv")

    def recv_anysource(self, *args, **kwargs):
        raise _unsupported("recv_anysource")

    def allreduce_coalesced(self, *args, **kwargs):
        raise _unsupported("allreduce_coalesced")

    def allgather_coalesced(self, *args, **kwargs):
        raise _unsupported("allgather_coalesced")

    def monitored_barrier(self, *args, **kwargs):
        raise _unsupported("monitored_barrier")


def _caller_blocks(depth=3):
    """True when the torch.distributed function that called the group method was called with
    async_op=False; `depth` is that function's frame counted from here (3 from _post via a
    method, 2 from barrier()). torch does not pass async_op to the process group; it waits on the
    returned Work at once. Any other caller gets a non-blocking call."""
    frame = sys._getframe(depth)
    return (frame.f_globals.get("__name__") == "torch.distributed.distributed_c10d"
            and frame.f_locals.get("async_op") is False)


def _split_counts(t, splits, p, where):
    """Element counts per rank from dim-0 split sizes (empty: equal split)."""
    rows = t.shape[0] if t.dim() > 0 else 1
    row = t.numel() // rows if rows else 0
    if not splits:
        if rows % p:
            raise ValueError(f"{where}: none given and dim 0 ({rows}) is not divisible by {p}")
        return [rows // p * row] * p
    splits = [int(s) for s in splits]
    if len(splits) != p or any(s < 0 for s in splits) or sum(splits) != rows:
        raise ValueError(
            f"{where}: {splits} must be {p} non-negative sizes summing to dim 0 ({rows})"
        )
    return [s * row for s in splits]


try:
    from tilecomm._torch_pg import ProcessGroupTilecomm as CppProcessGroupTilecomm
except ModuleNotFoundError:  # not built (no libtorch-dev): the Python group
    CppProcessGroupTilecomm = None
except ImportError as e:  # built but not loadable: say why, then use the Python group
    warnings.warn(f"tilecomm.torch: the C++ process group does not load ({e}); using the Python one")
    CppProcessGroupTilecomm = None

#: The process group class of "tilecomm" groups (the C++ one when it was built).
ProcessGroupTilecomm = CppProcessGroupTilecomm or PyProcessGroupTilecomm
#: Both implementations, for isinstance checks.
GROUP_TYPES = tuple(t for t in (CppProcessGroupTilecomm, PyProcessGroupTilecomm) if t is not None)
_implementation = "cpp" if CppProcessGroupTilecomm is not None else "python"


def set_implementation(name):
    """Selects the process group made for "tilecomm" groups created afterwards: "cpp" (the
    default when tilecomm._torch_pg was built) or "python". Returns the previous choice; "cpp"
    without the C++ module is a RuntimeError."""
    global _implementation
    if name not in ("cpp", "python"):
        raise ValueError(f"implementation must be 'cpp' or 'python', got {name!r}")
    if name == "cpp" and CppProcessGroupTilecomm is None:
        raise RuntimeError("tilecomm.torch: the C++ process group (tilecomm._torch_pg) was not built "
                           "(it needs libtorch-dev at build time; see python/README.md)")
    previous, _implementation = _implementation, name
    return previous


def register():
    """Registers the "tilecomm" backend with torch.distributed (once per process)."""
    if BACKEND.upper() not in dist.Backend._plugins:
        dist.Backend.register_backend(BACKEND, _create, extended_api=True)
