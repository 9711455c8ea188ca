"""olympus.errors: the exceptions a traced value raises when Python asks it
for a concrete value, and the one a leaked tracer raises.

- ConcretizationTypeError (a TypeError): a traced value used where a concrete
  one is needed (float(), complex(), shapes from values).
- TracerBoolConversionError: bool() of a traced value, i.e. Python `if`/`while`
  on it; use olympus.lax.cond / while_loop / olympus.numpy.where, or mark the
  argument static.
- TracerIntegerConversionError: int() or __index__() of a traced value (an
  index, a range bound).
- TracerArrayConversionError: numpy.asarray() of a traced value.
- NonConcreteBooleanIndexError (an IndexError): a traced boolean mask used
  as an index, whose result's shape would depend on its values; use
  jnp.where, or jnp.nonzero(mask, size=N).
- UnexpectedTracerError (a TypeError): a traced value used after its trace
  finished (it leaked through a global or a closure).

The three conversion errors are subclasses of ConcretizationTypeError here
(JAX makes the integer and array ones plain TypeErrors), so code catching
ConcretizationTypeError or TypeError catches them all.
"""
from olympus import _core

ConcretizationTypeError = _core.ConcretizationTypeError
TracerBoolConversionError = _core.TracerBoolConversionError
TracerIntegerConversionError = _core.TracerIntegerConversionError
TracerArrayConversionError = _core.TracerArrayConversionError
UnexpectedTracerError = _core.UnexpectedTracerError


class NonConcreteBooleanIndexError(IndexError):
    """A boolean mask index with traced values (its result's shape would
    depend on them)."""

__all__ = ["ConcretizationTypeError", "TracerBoolConversionError",
           "TracerIntegerConversionError", "TracerArrayConversionError", "UnexpectedTracerError",
           "NonConcreteBooleanIndexError"]
