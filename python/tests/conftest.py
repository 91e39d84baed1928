"""Shared fixtures of the tilecomm Python tests.

Run under MPI, every rank runs the same tests in the same order (collective calls must match):
    mpirun -np 2 /usr/bin/python3 -m pytest -q -p no:cacheprovider python/tests
with PYTHONPATH pointing at <build>/python. Inputs are small integers, so every sum is exact and
results are compared bit for bit with numpy / mpi4py references.
"""
import numpy as np
import pytest
from mpi4py import MPI

import tilecomm

MODES = ("sequential", "shaped", "fused")
DTYPES = (np.float32, np.float64, np.int32, np.int64)


@pytest.fixture(scope="session")
def world():
    return MPI.COMM_WORLD


@pytest.fixture(scope="session")
def comm(world):
    """One tilecomm communicator for the session, freed (collectively) at the end."""
    c = tilecomm.Communicator(world)
    yield c
    c.close()


@pytest.fixture(scope="session")
def device():
    """A small device whatever the machine: 2 CUs x 2 slots (the ranks share 2 cores)."""
    d = tilecomm.Device(cus=2, slots=2)
    yield d
    d.close()


def small_ints(shape, seed, r=2, dtype=np.float32):
    """Deterministic integers in [-r, r]: every sum and product in the tests stays exact."""
    rng = np.random.default_rng(seed)
    return rng.integers(-r, r + 1, size=shape).astype(dtype)
