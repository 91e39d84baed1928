"""tilecomm from Python: an AllReduce and a fused GEMV+AllReduce, checked against numpy.

    PYTHONPATH=<build>/python mpirun -np 2 /usr/bin/python3 python/examples/quickstart.py
"""
import numpy as np
from mpi4py import MPI  # initialises MPI with MPI_THREAD_MULTIPLE (mpi4py's default)

import tilecomm

with tilecomm.Communicator(MPI.COMM_WORLD) as comm, tilecomm.Device(cus=2, slots=2) as dev:
    p, me = comm.size, comm.rank

    # AllReduce: recv=None returns a new array; tilecomm.allreduce(comm, a, a) is in place.
    total = tilecomm.allreduce(comm, np.arange(6, dtype=np.float32) + me)
    assert (total == np.arange(6) * p + p * (p - 1) / 2).all()

    # GEMV + AllReduce: rank r holds W_r [m x k_r] and x_r [k_r]; everyone gets sum_r W_r x_r.
    m, k = 256, 64
    w = np.full((m, k), me + 1, np.float32)
    x = np.ones(k, np.float32)
    with tilecomm.GemvAllReduce(comm, dev, m, k) as op:
        for mode in tilecomm.MODES:  # "sequential", "shaped", "fused": the same result
            y = op.run(w, x, mode=mode)
            assert (y == k * p * (p + 1) / 2).all(), mode

    if me == 0:
        print(f"quickstart: {p} ranks, allreduce and GemvAllReduce in every mode OK")
