"""fnad.experimental.compilation_cache: jax's module of that name (`compilation_cache`)."""
