"""olympus.config: the process-wide switches."""
from olympus import _core


class Config:
    """`config.update(name, value)` sets a switch; `config.<name>` reads it.

    olympus_enable_x64: when off (the default, or OLYMPUS_ENABLE_X64 unset),
    64-bit dtypes canonicalise to 32-bit ones and the default float/int are
    float32/int32.
    olympus_jit_cache_size: the most traces each jitted function keeps (default
    4096; 0 keeps none); past it the least recently used go first.
    """

    _names = ("olympus_enable_x64", "olympus_jit_cache_size")

    def update(self, name, value):
        if name == "olympus_enable_x64":
            _core.set_x64(bool(value))
            return
        if name == "olympus_jit_cache_size":
            _core.set_jit_cache_size(value)
            return
        raise AttributeError(f"Unrecognized config option: {name}")

    def __getattr__(self, name):
        if name == "olympus_enable_x64":
            return bool(_core.x64_enabled())
        if name == "olympus_jit_cache_size":
            return _core.jit_cache_size()
        raise AttributeError(f"Unrecognized config option: {name}")

    def __setattr__(self, name, value):
        raise AttributeError("use olympus.config.update(name, value)")

    def values(self):
        return {n: getattr(self, n) for n in self._names}

    def __repr__(self):
        return f"Config({self.values()})"


config = Config()
