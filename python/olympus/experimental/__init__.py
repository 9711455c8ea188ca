"""olympus.experimental: APIs whose details may still change (io_callback, the
buffer_callback module: `from olympus.experimental.buffer_callback import
buffer_callback`, and the host_callback module: `from olympus.experimental
import host_callback`), callback statistics (`callback_stats`,
`collect_callback_stats`), progress bars for compiled loops (`progress_bar`) and
`callback_context()` (the device, group member and batch element a host call
serves); see docs/beyond.md."""
from olympus._src.callback import io_callback
from olympus.experimental import buffer_callback
from olympus.experimental.callback_profile import (
    CallbackStat, CallbackStats, callback_stats, collect_callback_stats, enable_callback_stats,
    reset_callback_stats)
from olympus.experimental import progress
from olympus.experimental import multihost_utils
from olympus.experimental.progress import progress_bar
from olympus.experimental.context import CallbackContext, callback_context

__all__ = ["io_callback", "buffer_callback", "callback_stats", "collect_callback_stats",
           "enable_callback_stats", "reset_callback_stats", "CallbackStats", "CallbackStat",
           "progress", "progress_bar", "multihost_utils", "callback_context", "CallbackContext"]
