"""olympus.sharding: where an array's data lives. Every olympus array is on one
device today, so its sharding is a SingleDeviceSharding."""


class SingleDeviceSharding:
    """All of an array on one device."""

    def __init__(self, device):
        self._device = device

    @property
    def device_set(self):
        return {self._device}

    @property
    def addressable_devices(self):
        return {self._device}

    @property
    def is_fully_replicated(self):
        return True

    @property
    def is_fully_addressable(self):
        return True

    def __eq__(self, other):
        return isinstance(other, SingleDeviceSharding) and other._device == self._device

    def __hash__(self):
        return hash(("SingleDeviceSharding", self._device))

    def __repr__(self):
        return f"SingleDeviceSharding(device={self._device!r})"


__all__ = ["SingleDeviceSharding"]
