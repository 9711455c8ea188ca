"""olympus: an array JIT written in C whose compiled programs can call back into
host code. `import olympus` plays the part of `import jax`.

The hot paths (arrays, tracing, cached jit dispatch, operators, callback
trampolines) live in the C extension `olympus._core`; this package adds the
naturally Pythonic parts: decorators, pytree helpers, `olympus.numpy`,
`olympus.lax` and docstrings.
"""
import importlib.machinery as _machinery
import importlib.util as _importlib_util
import os as _os
import sys as _sys


def _load_core():
    """The extension: from $OLYMPUS_EXT_DIR (a build folder) if set, else in place."""
    ext_dir = _os.environ.get("OLYMPUS_EXT_DIR")
    if not ext_dir:
        from . import _core
        return _core
    for suffix in _machinery.EXTENSION_SUFFIXES:
        path = _os.path.join(ext_dir, "_core" + suffix)
        if _os.path.exists(path):
            break
    else:
        raise ImportError(f"olympus: OLYMPUS_EXT_DIR={ext_dir!r} holds no _core extension "
                          f"(looked for _core{_machinery.EXTENSION_SUFFIXES[0]})")
    loader = _machinery.ExtensionFileLoader("olympus._core", path)
    spec = _importlib_util.spec_from_file_location("olympus._core", path, loader=loader)
    module = _importlib_util.module_from_spec(spec)
    _sys.modules["olympus._core"] = module
    spec.loader.exec_module(module)
    return module


_core = _load_core()

Array = _core.Array
CallbackError = _core.CallbackError
ConcretizationTypeError = _core.ConcretizationTypeError

from ._src.config import config, enable_x64, disable_x64, disable_jit  # noqa: E402
from ._src.api import (  # noqa: E402
    ensure_compile_time_eval, jit, make_jaxpr, ShapeDtypeStruct, CpuDevice, devices, local_devices, device_count,
    local_device_count, block_until_ready, device_put, device_get, default_backend,
    process_index, process_count,
)
from ._src.ad import (  # noqa: E402
    vmap, jvp, linearize, vjp, grad, value_and_grad, jacfwd, jacrev, hessian, linear_transpose,
    custom_jvp, custom_vjp, checkpoint, remat, closure_convert, eval_shape,
)
from . import tree_util  # noqa: E402
from . import errors  # noqa: E402
from . import test_util  # noqa: E402
from . import sharding  # noqa: E402
from .sharding import make_mesh  # noqa: E402
from ._src.sharded import (  # noqa: E402
    make_array_from_callback, make_array_from_single_device_arrays,
)
from ._src.multihost import make_array_from_process_local_data  # noqa: E402
from . import numpy  # noqa: E402
from . import lax  # noqa: E402
from . import random  # noqa: E402
from ._src import array_methods as _array_methods  # noqa: E402
from ._src import ad as _ad  # noqa: E402
from ._src.callback import pure_callback, effects_barrier  # noqa: E402
from ._src.pmap import pmap  # noqa: E402
from ._src.shard_map import shard_map  # noqa: E402
from . import debug  # noqa: E402
from . import experimental  # noqa: E402
from . import ffi  # noqa: E402
from . import tree  # noqa: E402
from . import nn  # noqa: E402
from . import scipy  # noqa: E402
from . import extend  # noqa: E402
from . import distributed  # noqa: E402

_array_methods.install()
_ad.install_tracer_item()
jacobian = jacrev  # JAX's name for reverse-mode jacobians


def _drain_device_streams():
    """At exit, computations still queued on a device run to the end first."""
    try:
        _core.effects_barrier()
    except Exception as e:  # no caller is left to raise to
        import logging
        logging.getLogger("olympus").error("a computation queued on a device failed: %s", e)


import atexit as _atexit  # noqa: E402

_atexit.register(_drain_device_streams)

__version__ = "0.1.0"

__all__ = [
    "Array", "CallbackError", "ConcretizationTypeError", "config", "jit", "make_jaxpr",
    "ShapeDtypeStruct", "CpuDevice", "devices", "local_devices", "device_count",
    "local_device_count", "block_until_ready", "device_put", "device_get", "tree_util",
    "numpy", "lax", "pure_callback", "effects_barrier", "debug", "experimental", "ffi",
    "vmap", "pmap", "jvp", "linearize", "vjp", "grad", "value_and_grad", "jacfwd", "jacrev", "hessian",
    "linear_transpose", "custom_jvp", "custom_vjp", "checkpoint", "remat", "closure_convert",
    "eval_shape", "errors", "sharding", "enable_x64", "disable_x64", "jacobian", "disable_jit",
    "ensure_compile_time_eval", "test_util", "tree", "nn", "scipy", "distributed",
    "process_index", "process_count",
    "make_mesh", "make_array_from_callback", "make_array_from_single_device_arrays",
    "make_array_from_process_local_data",
]
__all__ += ["shard_map"]
