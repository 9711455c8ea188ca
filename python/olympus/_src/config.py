"""olympus.config: the process-wide switches."""
import contextlib
import os

from olympus import _core


def _env_bool(name, default):
    v = os.environ.get(name)
    if v is None or v == "":
        return default
    return v.strip().lower() in ("1", "true", "yes", "on")


def _env_int(name, default):
    v = os.environ.get(name)
    try:
        return int(float(v)) if v else default
    except ValueError:
        raise ValueError(f"{name} must be a number of bytes, got {v!r}") from None


class Config:
    """`config.update(name, value)` sets a switch; `config.<name>` reads it.

    olympus_enable_x64: when off (the default, or OLYMPUS_ENABLE_X64 unset),
    64-bit dtypes canonicalise to 32-bit ones and the default float/int are
    float32/int32.
    olympus_jit_cache_size: the most traces each jitted function keeps (default
    4096; 0 keeps none); past it the least recently used go first.
    olympus_num_cpu_devices: the number of CPU devices (OLYMPUS_NUM_CPU_DEVICES,
    default 1); settable only before the devices are first used.
    olympus_async_dispatch: where a computation goes (OLYMPUS_ASYNC_DISPATCH).
    "auto" (default): short work runs at once on the calling thread when its
    device is idle, or waits its turn behind the device's queued work; long
    work (64 MiB written) is queued and returns at once, its results computed
    in the background (reading one waits; an error surfaces there).
    "async": every jitted or eager computation returns at once that way.
    "sync": every call waits for its results, so every error surfaces at the
    call.
    olympus_host_callback_inline, olympus_host_callback_max_queue_byte_size,
    olympus_host_callback_outfeed, olympus_host_callback_legacy: see
    olympus.experimental.host_callback (each with its OLYMPUS_HOST_CALLBACK_*
    environment variable).
    """

    _names = ("olympus_enable_x64", "olympus_jit_cache_size", "olympus_num_cpu_devices",
              "olympus_async_dispatch",
              "olympus_host_callback_inline", "olympus_host_callback_max_queue_byte_size",
              "olympus_host_callback_outfeed", "olympus_host_callback_legacy")

    def __init__(self):
        flags = {
            "olympus_host_callback_inline": _env_bool("OLYMPUS_HOST_CALLBACK_INLINE", False),
            "olympus_host_callback_outfeed": _env_bool("OLYMPUS_HOST_CALLBACK_OUTFEED", False),
            "olympus_host_callback_legacy": _env_bool("OLYMPUS_HOST_CALLBACK_LEGACY", True),
        }
        object.__setattr__(self, "_flags", flags)
        size = _env_int("OLYMPUS_HOST_CALLBACK_MAX_QUEUE_BYTE_SIZE", int(256 * 1e6))
        _core.outfeed_set_capacity(size)

    def update(self, name, value):
        if name == "olympus_enable_x64":
            _core.set_x64(bool(value))
        elif name == "olympus_jit_cache_size":
            _core.set_jit_cache_size(value)
        elif name == "olympus_num_cpu_devices":
            _core.set_device_count(value)
        elif name == "olympus_async_dispatch":
            _core.set_dispatch_mode(value)
        elif name == "olympus_host_callback_max_queue_byte_size":
            _core.outfeed_set_capacity(int(value))
        elif name in self._flags:
            self._flags[name] = bool(value)
        else:
            raise AttributeError(f"Unrecognized config option: {name}")

    def __getattr__(self, name):
        if name == "olympus_enable_x64":
            return bool(_core.x64_enabled())
        if name == "olympus_jit_cache_size":
            return _core.jit_cache_size()
        if name == "olympus_num_cpu_devices":
            return int(_core.device_count())
        if name == "olympus_async_dispatch":
            return _core.dispatch_mode()
        if name == "olympus_host_callback_max_queue_byte_size":
            return int(_core.outfeed_capacity())
        flags = object.__getattribute__(self, "_flags")
        if name in flags:
            return flags[name]
        raise AttributeError(f"Unrecognized config option: {name}")

    def __setattr__(self, name, value):
        raise AttributeError("use olympus.config.update(name, value)")

    def values(self):
        return {n: getattr(self, n) for n in self._names}

    def __repr__(self):
        return f"Config({self.values()})"


config = Config()


@contextlib.contextmanager
def enable_x64(new_val=True):
    """`with olympus.enable_x64():` turns 64-bit dtypes on for the block and
    restores the previous setting after it (also on an exception). The switch
    is process-wide: other threads see it while the block runs."""
    old = config.olympus_enable_x64
    config.update("olympus_enable_x64", bool(new_val))
    try:
        yield
    finally:
        config.update("olympus_enable_x64", old)


def disable_x64():
    """`with olympus.disable_x64():` the opposite of enable_x64."""
    return enable_x64(False)


@contextlib.contextmanager
def disable_jit(disable=True):
    """`with olympus.disable_jit():` jitted functions run their Python body op
    by op instead of compiling it (values can be printed, pdb works); the
    previous setting comes back after the block. Process-wide. make_jaxpr is
    unaffected."""
    old = _core.set_jit_disabled(bool(disable))
    try:
        yield
    finally:
        _core.set_jit_disabled(old)
