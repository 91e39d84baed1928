"""tilecomm: fused compute-collective operators on a CPU device model over MPI.

The compiled module is tilecomm._core; everything it defines is re-exported here. `import
tilecomm.torch` adds the PyTorch integration (a torch.distributed backend and model modules).
"""
from tilecomm._core import *  # noqa: F401,F403
from tilecomm._core import Error, __doc__  # noqa: F401

# Objects the binding defines report the package as their module.
import tilecomm._core as _core

for _name in dir(_core):
    _obj = getattr(_core, _name)
    if isinstance(_obj, type) and getattr(_obj, "__module__", "") == "tilecomm._core":
        try:
            _obj.__module__ = "tilecomm"
        except (AttributeError, TypeError):
            pass
del _name, _obj, _core
