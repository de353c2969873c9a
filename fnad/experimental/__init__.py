"""fnad.experimental: jax.experimental's modules that fnad has (`ode.odeint`)."""
