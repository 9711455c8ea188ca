"""olympus.numpy: the NumPy API on olympus arrays (`import olympus.numpy as jnp`).

Functions accept Arrays, tracers and array-likes, work eagerly and under jit,
and follow NumPy's values and dtypes canonicalised by the x64 switch (x64 off:
int64 -> int32, float64 -> float32, ...). Python scalars are weakly typed.
"""
import numpy as _np

from olympus import _core
from olympus._src.jnp import *  # noqa: F401,F403 (the functions; see its __all__)
from olympus._src.jnp_more import *  # noqa: F401,F403 (the rest; wins over jnp's names)
from olympus._src.einsum import einsum, einsum_path  # noqa: F401
from olympus._src.polynomial import *  # noqa: F401,F403 (convolve, correlate, poly*, roots)
from olympus._src import dtypes as _dtypes
from olympus._src.jnp_index import *  # noqa: F401,F403 (take, nonzero, unique, ...; its where)

ndarray = _core.Array

# dtypes (NumPy's scalar types; 64-bit ones canonicalise to 32 bits with x64 off)
bool_ = _np.bool_
int8, int16, int32, int64 = _np.int8, _np.int16, _np.int32, _np.int64
uint8, uint16, uint32, uint64 = _np.uint8, _np.uint16, _np.uint32, _np.uint64
float16, float32, float64 = _np.float16, _np.float32, _np.float64
complex64, complex128 = _np.complex64, _np.complex128
if _dtypes.bfloat16 is not None:
    bfloat16 = _dtypes.bfloat16
int_ = _np.int64
float_ = _np.float64
complex_ = _np.complex128
bool = _np.bool_  # the array API's name  # noqa: A001
single, double = _np.float32, _np.float64
csingle, cdouble = _np.complex64, _np.complex128
uint = _np.uint64
object_ = _np.object_
character = _np.character
flexible = _np.flexible
ComplexWarning = getattr(_np, "exceptions", _np).ComplexWarning
dtype = _np.dtype
generic = _np.generic
number = _np.number
inexact = _np.inexact
floating = _np.floating
complexfloating = _np.complexfloating
integer = _np.integer
signedinteger = _np.signedinteger
unsignedinteger = _np.unsignedinteger
finfo = _np.finfo
iinfo = _np.iinfo
issubdtype = _np.issubdtype
can_cast = _np.can_cast

pi = _np.pi
e = _np.e
inf = _np.inf
nan = _np.nan
euler_gamma = _np.euler_gamma
newaxis = None

# NumPy's own helpers, as JAX re-exports them
iterable = _np.iterable
array_repr = _np.array_repr
array_str = _np.array_str
get_printoptions = _np.get_printoptions
set_printoptions = _np.set_printoptions
printoptions = _np.printoptions
save = _np.save
savez = _np.savez

__array_api_version__ = "2023.12"


class _ArrayNamespaceInfo:
    """The array API's inspection namespace (`__array_namespace_info__()`)."""

    def capabilities(self):
        return {"boolean indexing": False, "data-dependent shapes": False}

    def default_device(self):
        from olympus import local_devices
        return local_devices()[0]

    def devices(self):
        from olympus import devices
        return devices()

    def default_dtypes(self, *, device=None):
        return {"real floating": _dtypes.default_float(), "complex floating":
                _dtypes.default_complex(), "integral": _dtypes.default_int(),
                "indexing": _dtypes.default_int()}

    def dtypes(self, *, device=None, kind=None):
        names = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
                 "uint64", "float32", "float64", "complex64", "complex128"]
        out = {n: _dtypes.canonicalize(n) for n in names}
        out = {n: d for n, d in out.items() if d == _np.dtype(n)}
        if kind is None:
            return out
        return {n: d for n, d in out.items() if isdtype(d, kind)}


def __array_namespace_info__():
    return _ArrayNamespaceInfo()


def result_type(*args):
    """The promoted dtype of arrays, dtypes, scalars and the Python types int,
    float, complex, bool (which count as weak: `result_type(float, float32)` is
    float32; alone they give the default type of their kind)."""
    return _dtypes.result_type(*args)


def promote_types(a, b):
    """The promoted dtype of two dtypes (not weak), canonicalised."""
    return _dtypes.result_type(_np.dtype(a), _np.dtype(b))


def isscalar(element):
    if isinstance(element, ndarray) or _core.is_tracer(element):
        return element.ndim == 0
    return _np.isscalar(element)


def iscomplexobj(x):
    return issubdtype(_dtypes.dtype_and_weak(x)[0], complexfloating)


def isrealobj(x):
    return not iscomplexobj(x)


from olympus.numpy import fft  # noqa: E402,F401 (jnp.fft: the FFT functions)
from olympus.numpy import linalg  # noqa: E402,F401 (jnp.linalg)
