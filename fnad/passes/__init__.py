"""fnad.passes: jaxpr -> jaxpr rewrites."""
