"""olympus.config: the process-wide switches (only `olympus_enable_x64` today)."""
from olympus import _core


class Config:
    """`config.update(name, value)` sets a switch; `config.<name>` reads it.

    olympus_enable_x64: when off (the default, or OLYMPUS_ENABLE_X64 unset),
    64-bit dtypes canonicalise to 32-bit ones and the default float/int are
    float32/int32.
    """

    _names = ("olympus_enable_x64",)

    def update(self, name, value):
        if name == "olympus_enable_x64":
            _core.set_x64(bool(value))
            return
        raise AttributeError(f"Unrecognized config option: {name}")

    def __getattr__(self, name):
        if name == "olympus_enable_x64":
            return bool(_core.x64_enabled())
        raise AttributeError(f"Unrecognized config option: {name}")

    def __setattr__(self, name, value):
        raise AttributeError("use olympus.config.update(name, value)")

    def values(self):
        return {n: getattr(self, n) for n in self._names}

    def __repr__(self):
        return f"Config({self.values()})"


config = Config()
