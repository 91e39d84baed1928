"""What only the Python layer adds: the GIL is released while the library works, and MPI must
be initialised with MPI_THREAD_MULTIPLE."""
import os
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import tilecomm


def test_gil_is_released_during_a_collective(comm):
    """Rank 0 enters the allreduce 0.5 s late; meanwhile the other ranks wait inside it. A Python
    thread on those ranks stamps the time every 10 ms: it must have stamped times strictly inside
    the call, which it cannot while the calling thread holds the GIL."""
    if comm.size == 1:
        pytest.skip("needs a rank to wait for")
    stamps = []
    stop = threading.Event()

    def stamp():
        while not stop.is_set():
            stamps.append(time.monotonic())
            time.sleep(0.01)

    comm.barrier()
    t = threading.Thread(target=stamp)
    t.start()
    try:
        if comm.rank == 0:
            time.sleep(0.5)
        t0 = time.monotonic()
        out = tilecomm.allreduce(comm, np.ones(16, np.int64))
        t1 = time.monotonic()
    finally:
        stop.set()
        t.join()
    np.testing.assert_array_equal(out, np.full(16, comm.size))
    if comm.rank != 0:
        assert t1 - t0 > 0.3, t1 - t0
        inside = [s for s in stamps if t0 + 0.05 < s < t1 - 0.05]
        assert len(inside) >= 5, f"{len(inside)} stamps inside a {t1 - t0:.2f} s allreduce"


CHILD = r"""
import mpi4py
mpi4py.rc.thread_level = "serialized"
from mpi4py import MPI
import tilecomm
try:
    tilecomm.Communicator(MPI.COMM_WORLD)
except tilecomm.Error as e:
    print("CODE", e.code)
    print("MSG", e)
"""


def test_thread_level_below_multiple_is_a_clear_error(comm):
    """A fresh singleton process (no mpirun environment) that initialises MPI_THREAD_SERIALIZED."""
    if comm.rank != 0:
        return
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_", "PMIX_", "PRTE_"))}
    env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    r = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True,
                       timeout=120)
    assert "CODE InvalidUsage" in r.stdout, r.stdout + r.stderr
    assert "MPI_THREAD_SERIALIZED" in r.stdout and "MPI_THREAD_MULTIPLE" in r.stdout
    assert "mpi4py.rc.thread_level" in r.stdout
