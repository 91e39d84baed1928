"""tilecomm for PyTorch users.

``import tilecomm.torch`` registers the "tilecomm" torch.distributed backend:

    import torch.distributed as dist
    import tilecomm.torch
    dist.init_process_group("tilecomm", **tilecomm.torch.mpi_rendezvous())  # under mpirun

The fused operator contexts (tilecomm.GemvAllReduce, EmbeddingAllToAll, GemmAllToAll) accept
CPU, contiguous float32 tensors directly, and RowParallelLinear, ShardedEmbeddingBags and
MoEExperts are forward-only modules built on them (tilecomm/torch/modules.py).
"""
from tilecomm.torch._backend import (BACKEND, GROUP_TYPES, ProcessGroupTilecomm,
                                     PyProcessGroupTilecomm, mpi_rendezvous, register,
                                     set_implementation)
from tilecomm.torch.modules import MoEExperts, RowParallelLinear, ShardedEmbeddingBags

register()

__all__ = ["BACKEND", "GROUP_TYPES", "ProcessGroupTilecomm", "PyProcessGroupTilecomm",
           "set_implementation", "mpi_rendezvous", "RowParallelLinear",
           "ShardedEmbeddingBags", "MoEExperts"]
