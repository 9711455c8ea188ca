"""olympus.experimental: APIs whose details may still change (io_callback, the
buffer_callback module: `from olympus.experimental.buffer_callback import
buffer_callback`, and the host_callback module: `from olympus.experimental
import host_callback`)."""
from olympus._src.callback import io_callback
from olympus.experimental import buffer_callback

__all__ = ["io_callback", "buffer_callback"]
