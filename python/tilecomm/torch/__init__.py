"""tilecomm for PyTorch users.

``import tilecomm.torch`` registers the "tilecomm" torch.distributed backend:

    import torch.distributed as dist
    import tilecomm.torch
    dist.init_process_group("tilecomm", **tilecomm.torch.mpi_rendezvous())  # under mpirun

The fused operator contexts (tilecomm.GemvAllReduce, EmbeddingAllToAll, GemmAllToAll) accept
CPU, contiguous float32 tensors directly.
"""
from tilecomm.torch._backend import BACKEND, ProcessGroupTilecomm, mpi_rendezvous, register

register()

__all__ = ["BACKEND", "ProcessGroupTilecomm", "mpi_rendezvous"]
