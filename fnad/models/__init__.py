"""Models written with fnad's public API only: layers, attention, MoE, the decoder-only LM and
the encoder stack (pure functions of nested-dict parameter trees)."""
from fnad.models.attention import attention, attention_init
from fnad.models.layers import (apply_rope, cross_entropy, dropout, embed, embedding_init, ffn,
                                ffn_init, layer_norm, layer_norm_init, linear, linear_init,
                                rms_norm, rms_norm_init, rope_angles, sinusoidal_positions,
                                unembed)
from fnad.models.moe import moe, moe_init
from fnad.models.transformer import (EncoderConfig, LMConfig, encoder_forward, encoder_init,
                                     forward, forward_cached, init_cache, init_params, loss)

__all__ = ["EncoderConfig", "LMConfig", "apply_rope", "attention", "attention_init",
           "cross_entropy", "dropout", "embed", "embedding_init", "encoder_forward",
           "encoder_init", "ffn", "ffn_init", "forward", "forward_cached", "init_cache",
           "init_params", "layer_norm", "layer_norm_init", "linear", "linear_init", "loss", "moe",
           "moe_init", "rms_norm", "rms_norm_init", "rope_angles", "sinusoidal_positions",
           "unembed"]
