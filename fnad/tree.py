"""fnad.tree: short names for the pytree utilities, as `jax.tree`."""
import dataclasses as _dataclasses

from fnad.tree_util import all_leaves  # noqa: F401
from fnad.tree_util import tree_all as all
from fnad.tree_util import tree_broadcast as broadcast
from fnad.tree_util import tree_flatten as flatten
from fnad.tree_util import tree_flatten_with_path as flatten_with_path
from fnad.tree_util import tree_leaves as leaves
from fnad.tree_util import tree_leaves_with_path as leaves_with_path
from fnad.tree_util import tree_map as map
from fnad.tree_util import tree_map_with_path as map_with_path
from fnad.tree_util import tree_reduce as reduce
from fnad.tree_util import tree_reduce_associative as reduce_associative
from fnad.tree_util import tree_structure as structure
from fnad.tree_util import tree_transpose as transpose
from fnad.tree_util import tree_unflatten as unflatten

__all__ = ["all", "broadcast", "flatten", "flatten_with_path", "leaves", "leaves_with_path",
           "map", "map_with_path", "reduce", "reduce_associative", "static", "structure",
           "transpose", "unflatten"]


def static(**kwargs):
    """A dataclasses.field marked static (`metadata={"static": True}`), so that
    fnad.tree_util.register_dataclass puts it in the treedef, not among the leaves."""
    metadata = {"static": True, **(kwargs.pop("metadata", None) or {})}
    return _dataclasses.field(metadata=metadata, **kwargs)
