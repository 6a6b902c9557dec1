/*
 * baseRT.h — the subset of baseRT's C ABI that superfluid binds.
 *
 * Written by the superfluid project from baseRT's public description (see docs/runtimes.md);
 * it is not baseRT's own header. Python reads the four macros below (runtime/basert/header.py):
 * the header version and the ABI number are the `requires` pair of this build, typed nowhere else.
 * Each macro stays on its own line in the form `#define NAME <integer>`.
 *
 * ABI history (SPEC §4.1): 0.3.0 and older state no ABI number; 0.3.1 states ABI 1 and exports
 * baseRT_abi_version(); 0.4.0 states ABI 1 and adds baseRT_get_config_into(). Within ABI 1 the
 * configuration struct may grow or shrink; a host reads it by size (get_config_into) or, with an
 * older library, by value only after baseRT_model_config_sizeof() equals sizeof(BaseRTModelConfig).
 */
#ifndef BASERT_H
#define BASERT_H

#include <stddef.h>
#include <stdint.h>

#define BASERT_VERSION_MAJOR 0
#define BASERT_VERSION_MINOR 4
#define BASERT_VERSION_PATCH 0
#define BASERT_ABI_VERSION 1

#define BASERT_VERSION ((BASERT_VERSION_MAJOR << 16) | (BASERT_VERSION_MINOR << 8) | BASERT_VERSION_PATCH)

#ifdef __cplusplus
extern "C" {
#endif

/* An opaque handle to a loaded model; NULL on failure. */
typedef void *baseRT_model_t;

/* Error categories (an int-sized enum). A minor release may add values, never repurposes one. */
typedef enum BaseRTErrorCode {
    BASERT_OK = 0,
    BASERT_ERR_UNKNOWN = 1,
    BASERT_ERR_INVALID_ARGUMENT = 2,
    BASERT_ERR_FILE_NOT_FOUND = 3,
    BASERT_ERR_INVALID_FORMAT = 4,
    BASERT_ERR_UNSUPPORTED = 5,
    BASERT_ERR_OUT_OF_MEMORY = 6,
    BASERT_ERR_GPU = 7,
    BASERT_ERR_GENERATION_FAILED = 8
} BaseRTErrorCode;

/*
 * A model's configuration: the layout of the 0.3 line, 131 fields, 1792 bytes, align 4, no implicit
 * padding. Zero means "not applicable". Bitfields of 64 bytes hold 512 layer bits (bit i = layer i).
 */
typedef struct BaseRTModelConfig {
    /* decoder core */
    uint32_t dim;                          /*    0 */
    uint32_t n_layers;                     /*    4 */
    uint32_t n_heads;                      /*    8 */
    uint32_t n_kv_heads;                   /*   12 */
    uint32_t head_dim;                     /*   16 */
    uint32_t q_dim;                        /*   20 */
    uint32_t kv_dim;                       /*   24 */
    uint32_t ffn_dim;                      /*   28 */
    uint32_t vocab_size;                   /*   32 */
    uint32_t max_seq_len;                  /*   36 */
    float norm_eps;                        /*   40 */
    float rope_theta;                      /*   44 */
    uint32_t sliding_window_pattern;       /*   48 */
    uint32_t sliding_window;               /*   52 */
    float rope_local_theta;                /*   56 */
    char architecture[32];                 /*   60  NUL-padded */
    /* encoder (0 = decoder-only) */
    uint32_t enc_n_layers;                 /*   92 */
    uint32_t enc_n_heads;                  /*   96 */
    uint32_t enc_dim;                      /*  100 */
    uint32_t enc_ffn_dim;                  /*  104 */
    uint32_t n_mels;                       /*  108 */
    uint32_t enc_max_seq_len;              /*  112 */
    /* Gemma-4 extras */
    uint32_t n_embd_per_layer;             /*  116 */
    uint32_t n_layer_kv_from_start;        /*  120 */
    float logit_softcap;                   /*  124 */
    float attention_scale;                 /*  128 */
    uint32_t head_dim_swa;                 /*  132 */
    uint32_t head_dim_global;              /*  136 */
    float global_rope_partial_factor;      /*  140 */
    uint8_t swa_layers[64];                /*  144 */
    uint32_t ffn_dims[128];                /*  208  per-layer override, 0 = uniform */
    uint32_t n_kv_heads_per_layer[128];    /*  720  per-layer override, 0 = uniform */
    /* hybrid attention (Gated DeltaNet) */
    uint8_t attn_output_gate;              /* 1232 */
    uint8_t _qwen35_pad[3];                /* 1233 */
    float partial_rotary_factor;           /* 1236 */
    uint32_t full_attention_interval;      /* 1240 */
    uint8_t linear_attn_layers[64];        /* 1244 */
    uint32_t gdn_num_k_heads;              /* 1308 */
    uint32_t gdn_num_v_heads;              /* 1312 */
    uint32_t gdn_key_head_dim;             /* 1316 */
    uint32_t gdn_value_head_dim;           /* 1320 */
    uint32_t gdn_conv_kernel;              /* 1324 */
    /* Mamba-2 SSM */
    uint32_t ssm_state_size;               /* 1328 */
    uint32_t ssm_conv_kernel;              /* 1332 */
    uint32_t ssm_num_groups;               /* 1336 */
    uint32_t ssm_inner_size;               /* 1340 */
    uint32_t ssm_num_heads;                /* 1344 */
    /* mixture of experts */
    uint32_t n_experts;                    /* 1348 */
    uint32_t n_experts_used;               /* 1352 */
    uint32_t n_experts_shared;             /* 1356 */
    uint32_t expert_ffn_dim;               /* 1360 */
    uint8_t expert_gating;                 /* 1364 */
    uint8_t norm_topk_prob;                /* 1365 */
    uint8_t _moe_pad[2];                   /* 1366 */
    float expert_weights_scale;            /* 1368 */
    /* vision tower */
    uint32_t vision_n_layers;              /* 1372 */
    uint32_t vision_dim;                   /* 1376 */
    uint32_t vision_n_heads;               /* 1380 */
    uint32_t vision_head_dim;              /* 1384 */
    uint32_t vision_ffn_dim;               /* 1388 */
    uint32_t vision_patch_size;            /* 1392 */
    uint32_t vision_image_size;            /* 1396 */
    uint32_t vision_pooling_kernel;        /* 1400 */
    uint32_t vision_soft_tokens;           /* 1404 */
    float vision_norm_eps;                 /* 1408 */
    float vision_rope_theta;               /* 1412 */
    uint32_t vision_pos_embed_size;        /* 1416 */
    uint32_t image_token_id;               /* 1420 */
    uint32_t boi_token_id;                 /* 1424 */
    uint32_t eoi_token_id;                 /* 1428 */
    /* vision family selector */
    uint32_t vision_arch;                  /* 1432 */
    uint32_t vision_spatial_merge;         /* 1436 */
    uint32_t vision_temporal_patch;        /* 1440 */
    uint32_t vision_out_dim;               /* 1444 */
    /* audio tower */
    uint32_t audio_n_layers;               /* 1448 */
    uint32_t audio_dim;                    /* 1452 */
    uint32_t audio_n_heads;                /* 1456 */
    uint32_t audio_head_dim;               /* 1460 */
    uint32_t audio_ffn_dim;                /* 1464 */
    uint32_t audio_output_proj_dim;        /* 1468 */
    uint32_t audio_chunk_size;             /* 1472 */
    uint32_t audio_left_context;           /* 1476 */
    uint32_t audio_conv_kernel;            /* 1480 */
    uint32_t audio_soft_tokens;            /* 1484 */
    float audio_logit_softcap;             /* 1488 */
    float audio_norm_eps;                  /* 1492 */
    float audio_gradient_clip;             /* 1496 */
    float audio_residual_weight;           /* 1500 */
    float audio_ms_per_token;              /* 1504 */
    uint32_t audio_sscp_channels[2];       /* 1508 */
    uint32_t audio_token_id;               /* 1516 */
    uint32_t boa_token_id;                 /* 1520 */
    uint32_t eoa_token_id;                 /* 1524 */
    /* multimodal RoPE and RoPE scaling */
    uint32_t mrope_section[3];             /* 1528 */
    uint8_t mrope_interleaved;             /* 1540 */
    uint8_t _mrope_pad[3];                 /* 1541 */
    float rope_scaling_factor;             /* 1544 */
    float rope_low_freq_factor;            /* 1548 */
    float rope_high_freq_factor;           /* 1552 */
    uint32_t rope_orig_max_pos;            /* 1556 */
    uint32_t rope_scaling_type;            /* 1560 */
    /* output scaling and perception tower */
    float qk_scale_factor;                 /* 1564 */
    float output_multiplier;               /* 1568 */
    float post_norm_eps;                   /* 1572 */
    uint8_t nope_layers[64];               /* 1576 */
    float embed_norm_eps;                  /* 1640 */
    uint8_t vision_window_layers[64];      /* 1644 */
    uint32_t vision_window_size;           /* 1708 */
    uint32_t vision_pos_embed_h;           /* 1712 */
    uint32_t vision_pos_embed_w;           /* 1716 */
    uint32_t vision_adapter_dim;           /* 1720 */
    uint32_t video_token_id;               /* 1724 */
    /* latent attention (MLA) and sparse indexer */
    uint32_t q_lora_rank;                  /* 1728 */
    uint32_t kv_lora_rank;                 /* 1732 */
    uint32_t qk_nope_head_dim;             /* 1736 */
    uint32_t qk_rope_head_dim;             /* 1740 */
    uint32_t v_head_dim;                   /* 1744 */
    float routed_scaling_factor;           /* 1748 */
    uint32_t first_k_dense_replace;        /* 1752 */
    uint32_t nextn_predict_layers;         /* 1756 */
    uint32_t indexer_head_count;           /* 1760 */
    uint32_t indexer_key_length;           /* 1764 */
    uint32_t indexer_top_k;                /* 1768 */
    /* YaRN, SwiGLU limits, attention sinks */
    float rope_yarn_beta_fast;             /* 1772 */
    float rope_yarn_beta_slow;             /* 1776 */
    float swiglu_limit;                    /* 1780 */
    float swiglu_alpha;                    /* 1784 */
    uint8_t attention_sinks;               /* 1788 */
    uint8_t attention_bias;                /* 1789 */
    uint8_t rope_yarn_truncate;            /* 1790 */
    uint8_t _gptoss_pad;                   /* 1791 */
} BaseRTModelConfig;

_Static_assert(sizeof(BaseRTModelConfig) == 1792, "BaseRTModelConfig is the 0.3 line's 1792-byte layout");

/* ---- version and ABI identification ---- */

/* "MAJOR.MINOR.PATCH" of the loaded library; static storage. */
const char *baseRT_version_string(void);

/* sizeof(BaseRTModelConfig) as compiled into the library. */
size_t baseRT_model_config_sizeof(void);

/* The library's BASERT_ABI_VERSION. Since 0.3.1; absent from 0.3.0 and older (probe it). */
unsigned int baseRT_abi_version(void);

/*
 * The model's configuration, returned BY VALUE. Call it only when baseRT_model_config_sizeof()
 * equals sizeof(BaseRTModelConfig): a return of another size overwrites the caller's stack.
 */
BaseRTModelConfig baseRT_get_config(baseRT_model_t model);

/*
 * Copies min(out_size, own size) bytes of the configuration into out, zero-fills the rest of out,
 * and returns the library's own sizeof(BaseRTModelConfig). out == NULL copies nothing. Since 0.4.0.
 */
size_t baseRT_get_config_into(baseRT_model_t model, void *out, size_t out_size);

/* ---- lifecycle ---- */

/* kernel_library_path NULL = auto-detect; max_context 0 = the model's own. NULL on failure. */
baseRT_model_t baseRT_load_model(const char *model_path, const char *kernel_library_path, int max_context);
void baseRT_free_model(baseRT_model_t model);

/* Planning budget of device memory in bytes; 0 = no supported device. */
size_t baseRT_device_memory_budget(void);

/* ---- errors (thread-local, reset by the next successful call) ---- */

const char *baseRT_get_error(void);             /* "" when none */
BaseRTErrorCode baseRT_get_error_code(void);
const char *baseRT_strerror(BaseRTErrorCode code); /* static name, e.g. "FILE_NOT_FOUND" */

/* ---- tokenization ---- */

/* Writes at most max_tokens ids; returns the count written, < 0 on error. */
int baseRT_encode(baseRT_model_t model, const char *text, uint32_t *out_tokens, int max_tokens);
/* The text of one token, owned by the model; "" for special tokens. */
const char *baseRT_decode_token(baseRT_model_t model, uint32_t token);
uint32_t baseRT_bos_id(baseRT_model_t model);
uint32_t baseRT_eos_token_id(baseRT_model_t model);

/* ---- generation (single sequence, greedy) ---- */

/* Runs the prompt; returns the first generated token. */
uint32_t baseRT_prefill(baseRT_model_t model, const uint32_t *tokens, int n_tokens);
/* Feeds token at position; returns the next token. */
uint32_t baseRT_decode_step(baseRT_model_t model, uint32_t token, int position);

#ifdef __cplusplus
}
#endif

#endif /* BASERT_H */
