"""fnad.ad_checkpoint: jax.ad_checkpoint's names (`from jax.ad_checkpoint import
checkpoint_name` ports as `from fnad.ad_checkpoint import checkpoint_name`).

The code lives in fnad.remat; `fnad.remat` itself is the function (as `jax.remat`), so
this module is where the module-level names are reachable."""
from fnad.remat import checkpoint, checkpoint_name, checkpoint_policies, remat

__all__ = ["checkpoint", "checkpoint_name", "checkpoint_policies", "remat"]
