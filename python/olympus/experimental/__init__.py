"""olympus.experimental: APIs whose details may still change (io_callback)."""
from olympus._src.callback import io_callback

__all__ = ["io_callback"]
