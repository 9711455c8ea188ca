"""olympus.experimental: APIs whose details may still change (io_callback, and the
host_callback module: `from olympus.experimental import host_callback`)."""
from olympus._src.callback import io_callback

__all__ = ["io_callback"]
