"""fnad.numpy: the NumPy API (filled in next)."""
