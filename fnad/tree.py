"""fnad.tree: short names for the pytree utilities, as `jax.tree`."""
from fnad.tree_util import all_leaves  # noqa: F401
from fnad.tree_util import tree_all as all
from fnad.tree_util import tree_flatten as flatten
from fnad.tree_util import tree_flatten_with_path as flatten_with_path
from fnad.tree_util import tree_leaves as leaves
from fnad.tree_util import tree_leaves_with_path as leaves_with_path
from fnad.tree_util import tree_map as map
from fnad.tree_util import tree_map_with_path as map_with_path
from fnad.tree_util import tree_reduce as reduce
from fnad.tree_util import tree_structure as structure
from fnad.tree_util import tree_transpose as transpose
from fnad.tree_util import tree_unflatten as unflatten

__all__ = ["all", "flatten", "flatten_with_path", "leaves", "leaves_with_path", "map",
           "map_with_path", "reduce", "structure", "transpose", "unflatten"]
