"""The ctypes mirror of ``BaseRTModelConfig``: the 0.3 line's layout, 131 fields, 1792 bytes."""

from __future__ import annotations

import ctypes
from typing import Any

__all__ = ["BaseRTModelConfig", "CONFIG_SIZE", "architecture", "facts"]

_u32 = ctypes.c_uint32
_f32 = ctypes.c_float
_u8 = ctypes.c_uint8
c_char = ctypes.c_char


class BaseRTModelConfig(ctypes.Structure):
    """A model's configuration, laid out as our header's ``BaseRTModelConfig`` (align 4, no padding)."""

    _fields_ = [
    ("dim", _u32),  # 0
    ("n_layers", _u32),  # 4
    ("n_heads", _u32),  # 8
    ("n_kv_heads", _u32),  # 12
    ("head_dim", _u32),  # 16
    ("q_dim", _u32),  # 20
    ("kv_dim", _u32),  # 24
    ("ffn_dim", _u32),  # 28
    ("vocab_size", _u32),  # 32
    ("max_seq_len", _u32),  # 36
    ("norm_eps", _f32),  # 40
    ("rope_theta", _f32),  # 44
    ("sliding_window_pattern", _u32),  # 48
    ("sliding_window", _u32),  # 52
    ("rope_local_theta", _f32),  # 56
    ("architecture", c_char * 32),  # 60
    ("enc_n_layers", _u32),  # 92
    ("enc_n_heads", _u32),  # 96
    ("enc_dim", _u32),  # 100
    ("enc_ffn_dim", _u32),  # 104
    ("n_mels", _u32),  # 108
    ("enc_max_seq_len", _u32),  # 112
    ("n_embd_per_layer", _u32),  # 116
    ("n_layer_kv_from_start", _u32),  # 120
    ("logit_softcap", _f32),  # 124
    ("attention_scale", _f32),  # 128
    ("head_dim_swa", _u32),  # 132
    ("head_dim_global", _u32),  # 136
    ("global_rope_partial_factor", _f32),  # 140
    ("swa_layers", _u8 * 64),  # 144
    ("ffn_dims", _u32 * 128),  # 208
    ("n_kv_heads_per_layer", _u32 * 128),  # 720
    ("attn_output_gate", _u8),  # 1232
    ("_qwen35_pad", _u8 * 3),  # 1233
    ("partial_rotary_factor", _f32),  # 1236
    ("full_attention_interval", _u32),  # 1240
    ("linear_attn_layers", _u8 * 64),  # 1244
    ("gdn_num_k_heads", _u32),  # 1308
    ("gdn_num_v_heads", _u32),  # 1312
    ("gdn_key_head_dim", _u32),  # 1316
    ("gdn_value_head_dim", _u32),  # 1320
    ("gdn_conv_kernel", _u32),  # 1324
    ("ssm_state_size", _u32),  # 1328
    ("ssm_conv_kernel", _u32),  # 1332
    ("ssm_num_groups", _u32),  # 1336
    ("ssm_inner_size", _u32),  # 1340
    ("ssm_num_heads", _u32),  # 1344
    ("n_experts", _u32),  # 1348
    ("n_experts_used", _u32),  # 1352
    ("n_experts_shared", _u32),  # 1356
    ("expert_ffn_dim", _u32),  # 1360
    ("expert_gating", _u8),  # 1364
    ("norm_topk_prob", _u8),  # 1365
    ("_moe_pad", _u8 * 2),  # 1366
    ("expert_weights_scale", _f32),  # 1368
    ("vision_n_layers", _u32),  # 1372
    ("vision_dim", _u32),  # 1376
    ("vision_n_heads", _u32),  # 1380
    ("vision_head_dim", _u32),  # 1384
    ("vision_ffn_dim", _u32),  # 1388
    ("vision_patch_size", _u32),  # 1392
    ("vision_image_size", _u32),  # 1396
    ("vision_pooling_kernel", _u32),  # 1400
    ("vision_soft_tokens", _u32),  # 1404
    ("vision_norm_eps", _f32),  # 1408
    ("vision_rope_theta", _f32),  # 1412
    ("vision_pos_embed_size", _u32),  # 1416
    ("image_token_id", _u32),  # 1420
    ("boi_token_id", _u32),  # 1424
    ("eoi_token_id", _u32),  # 1428
    ("vision_arch", _u32),  # 1432
    ("vision_spatial_merge", _u32),  # 1436
    ("vision_temporal_patch", _u32),  # 1440
    ("vision_out_dim", _u32),  # 1444
    ("audio_n_layers", _u32),  # 1448
    ("audio_dim", _u32),  # 1452
    ("audio_n_heads", _u32),  # 1456
    ("audio_head_dim", _u32),  # 1460
    ("audio_ffn_dim", _u32),  # 1464
    ("audio_output_proj_dim", _u32),  # 1468
    ("audio_chunk_size", _u32),  # 1472
    ("audio_left_context", _u32),  # 1476
    ("audio_conv_kernel", _u32),  # 1480
    ("audio_soft_tokens", _u32),  # 1484
    ("audio_logit_softcap", _f32),  # 1488
    ("audio_norm_eps", _f32),  # 1492
    ("audio_gradient_clip", _f32),  # 1496
    ("audio_residual_weight", _f32),  # 1500
    ("audio_ms_per_token", _f32),  # 1504
    ("audio_sscp_channels", _u32 * 2),  # 1508
    ("audio_token_id", _u32),  # 1516
    ("boa_token_id", _u32),  # 1520
    ("eoa_token_id", _u32),  # 1524
    ("mrope_section", _u32 * 3),  # 1528
    ("mrope_interleaved", _u8),  # 1540
    ("_mrope_pad", _u8 * 3),  # 1541
    ("rope_scaling_factor", _f32),  # 1544
    ("rope_low_freq_factor", _f32),  # 1548
    ("rope_high_freq_factor", _f32),  # 1552
    ("rope_orig_max_pos", _u32),  # 1556
    ("rope_scaling_type", _u32),  # 1560
    ("qk_scale_factor", _f32),  # 1564
    ("output_multiplier", _f32),  # 1568
    ("post_norm_eps", _f32),  # 1572
    ("nope_layers", _u8 * 64),  # 1576
    ("embed_norm_eps", _f32),  # 1640
    ("vision_window_layers", _u8 * 64),  # 1644
    ("vision_window_size", _u32),  # 1708
    ("vision_pos_embed_h", _u32),  # 1712
    ("vision_pos_embed_w", _u32),  # 1716
    ("vision_adapter_dim", _u32),  # 1720
    ("video_token_id", _u32),  # 1724
    ("q_lora_rank", _u32),  # 1728
    ("kv_lora_rank", _u32),  # 1732
    ("qk_nope_head_dim", _u32),  # 1736
    ("qk_rope_head_dim", _u32),  # 1740
    ("v_head_dim", _u32),  # 1744
    ("routed_scaling_factor", _f32),  # 1748
    ("first_k_dense_replace", _u32),  # 1752
    ("nextn_predict_layers", _u32),  # 1756
    ("indexer_head_count", _u32),  # 1760
    ("indexer_key_length", _u32),  # 1764
    ("indexer_top_k", _u32),  # 1768
    ("rope_yarn_beta_fast", _f32),  # 1772
    ("rope_yarn_beta_slow", _f32),  # 1776
    ("swiglu_limit", _f32),  # 1780
    ("swiglu_alpha", _f32),  # 1784
    ("attention_sinks", _u8),  # 1788
    ("attention_bias", _u8),  # 1789
    ("rope_yarn_truncate", _u8),  # 1790
    ("_gptoss_pad", _u8),  # 1791
    ]


CONFIG_SIZE = ctypes.sizeof(BaseRTModelConfig)
if CONFIG_SIZE != 1792 or len(BaseRTModelConfig._fields_) != 131:  # the header's _Static_assert
    raise ImportError(f"BaseRTModelConfig mirror is {CONFIG_SIZE} bytes; our header states 1792")

# The facts a check report and a serve need; the rest of the struct stays available on the object.
_FACT_FIELDS = ("vocab_size", "n_layers", "dim", "n_heads", "n_kv_heads", "head_dim", "ffn_dim", "max_seq_len")


def architecture(config: BaseRTModelConfig) -> str:
    """The NUL-padded ``architecture`` as text (undecodable bytes replaced)."""
    return bytes(config.architecture).split(b"\0", 1)[0].decode("utf-8", "replace")


def facts(config: BaseRTModelConfig) -> dict[str, Any]:
    """The model facts a ``check --model`` report carries: architecture and the decoder's sizes."""
    out: dict[str, Any] = {"architecture": architecture(config)}
    for name in _FACT_FIELDS:
        out[name] = int(getattr(config, name))
    return out
