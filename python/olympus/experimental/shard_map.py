"""olympus.experimental.shard_map: `shard_map(f, mesh, in_specs, out_specs,
check_rep=True, auto=frozenset())`, JAX's older spelling of olympus.shard_map
(see docs/design.md, "shard_map")."""
from olympus._src.shard_map import experimental_shard_map as shard_map

__all__ = ["shard_map"]
