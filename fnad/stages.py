"""fnad.stages: the classes of `jit(f)`'s stages under jax.stages' names (`Wrapped` is what
`fnad.jit` returns; `trace`, `lower` and `compile` give the others: fnad/jit.py)."""
from fnad.jit import Compiled, JitWrapped as Wrapped, Lowered, Traced

__all__ = ["Compiled", "Lowered", "Traced", "Wrapped"]
