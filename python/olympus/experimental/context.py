"""olympus.experimental.callback_context(): inside a host function called from
compiled code, which device runs the call, which member of a device group
(pmap / shard_map axis indices) and which batch element (vmap with one call per
element) it serves. An olympus addition; see docs/beyond.md."""
from olympus import _core


class CallbackContext:
    """What a host call serves (read-only).

    kind: the primitive calling the host ("pure_callback", "io_callback",
      "debug_callback", "buffer_callback", "outside_call").
    device: the device whose computation made the call.
    axis_index: {axis name: index} of the device group's member (pmap,
      shard_map); {} outside a group.
    batch_index: the batch element's index at each enclosing vmap level,
      outermost first, when vmap makes one call per element (sequential and
      sequential_unrolled pure callbacks, io_callback, debug callbacks);
      () otherwise (outside vmap, or one call for the whole batch).
    """
    __slots__ = ("kind", "device", "axis_index", "batch_index")

    def __init__(self, kind, device, axis_index, batch_index):
        object.__setattr__(self, "kind", kind)
        object.__setattr__(self, "device", device)
        object.__setattr__(self, "axis_index", axis_index)
        object.__setattr__(self, "batch_index", batch_index)

    def __setattr__(self, name, value):
        raise AttributeError("CallbackContext is read-only")

    def __repr__(self):
        return (f"CallbackContext(kind={self.kind!r}, device={self.device!r}, "
                f"axis_index={self.axis_index!r}, batch_index={self.batch_index!r})")


def callback_context():
    """The context of the host call running on this thread (the innermost one
    when host functions nest), or None outside host calls. Taps
    (host_callback.id_tap) run on the outfeed's thread: theirs has the
    device only."""
    got = _core.callback_context()
    if got is None:
        return None
    kind, device, batch, axes = got
    from olympus._src import api
    devs = api.local_devices()
    return CallbackContext(kind, devs[device] if 0 <= device < len(devs) else device, axes, batch)


__all__ = ["CallbackContext", "callback_context"]
