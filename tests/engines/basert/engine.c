/*
 * The reference baseRT engine: implements runtime/basert/include/baseRT.h for tests.
 *
 * One source, compile-time switches (build.sh builds every variant):
 *   REF_VERSION        "0.3.0"       what baseRT_version_string() says
 *   REF_VARIANT        "0.3.0"       name returned by the test-only baseRT_ref_variant()
 *   REF_ABI            1             define to export baseRT_abi_version() returning it (0.3.1+)
 *   REF_CONFIG_INTO                  define to export baseRT_get_config_into() (0.4.0+)
 *   REF_CONFIG_EXTRA   5             trailing uint32 fields after the 1792-byte layout: the engine's
 *                                    own config struct (by value, sizeof, into) grows by 4*N bytes
 *   REF_OMIT_DECODE_STEP             define to leave out baseRT_decode_step (a missing symbol)
 *
 * Test-only exports (not in our header): baseRT_ref_variant(), baseRT_ref_get_config_calls().
 * baseRT_get_config also appends a line to $BASERT_REF_GET_CONFIG_MARKER when that is set, so a test
 * in another process can prove it was (never) called.
 * baseRT_device_memory_budget() returns $BASERT_REF_DEVICE_BUDGET (bytes), else 0 (no device).
 *
 * Model format (".base", little-endian), written by make_model.py:
 *    0  char[4]   "BASE"
 *    4  u32       format version (1)
 *    8  u32       vocab_size
 *   12  u32       dim
 *   16  u32       n_layers
 *   20  u32       n_heads
 *   24  u32       max_seq_len
 *   28  u32       bos_id
 *   32  u32       eos_id
 *   36  u32       unk_id
 *   40  char[32]  architecture, NUL-padded
 *   72  vocab_size x (u8 length, bytes)   the words
 *   ..  vocab_size x u32                   next[i]: the token that follows token i (greedy)
 */
/* The engine returns its own config struct by value (RefConfig, which may be larger than ours):
 * keep the header's prototype of baseRT_get_config aside under another name. */
#define baseRT_get_config baseRT_get_config__as_declared_by_header
#include "baseRT.h"
#undef baseRT_get_config

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef REF_VERSION
#define REF_VERSION "0.3.0"
#endif
#ifndef REF_VARIANT
#define REF_VARIANT REF_VERSION
#endif

#define REF_EXPORT __attribute__((visibility("default")))
#define REF_MAX_FILE (16u * 1024u * 1024u)
#define REF_MAX_VOCAB 65536u
#define REF_HEADER 72u

/* The engine's own configuration struct: our 1792 bytes, plus what this build appends. */
typedef struct RefConfig {
    BaseRTModelConfig base;
#if defined(REF_CONFIG_EXTRA)
    uint32_t extra[REF_CONFIG_EXTRA];
#endif
} RefConfig;

typedef struct RefModel {
    RefConfig config;
    uint32_t vocab_size, bos, eos, unk;
    char **words;      /* vocab_size NUL-terminated words */
    char **pieces;     /* vocab_size decode texts: " word", or "" for bos/eos */
    uint32_t *next;    /* vocab_size */
    int position;
} RefModel;

static _Thread_local char ref_error[512];
static _Thread_local BaseRTErrorCode ref_code;
static unsigned long ref_get_config_calls;

static void set_error(BaseRTErrorCode code, const char *fmt, const char *arg) {
    ref_code = code;
    snprintf(ref_error, sizeof ref_error, fmt, arg);
}

static void clear_error(void) {
    ref_code = BASERT_OK;
    ref_error[0] = '\0';
}

/* ---- identification ---- */

REF_EXPORT const char *baseRT_version_string(void) { return REF_VERSION; }

REF_EXPORT size_t baseRT_model_config_sizeof(void) { return sizeof(RefConfig); }

#if defined(REF_ABI)
REF_EXPORT unsigned int baseRT_abi_version(void) { return REF_ABI; }
#endif

REF_EXPORT const char *baseRT_ref_variant(void) { return REF_VARIANT; }

REF_EXPORT unsigned long baseRT_ref_get_config_calls(void) { return ref_get_config_calls; }

/* ---- errors ---- */

REF_EXPORT const char *baseRT_get_error(void) { return ref_error; }

REF_EXPORT BaseRTErrorCode baseRT_get_error_code(void) { return ref_code; }

REF_EXPORT const char *baseRT_strerror(BaseRTErrorCode code) {
    switch (code) {
    case BASERT_OK: return "OK";
    case BASERT_ERR_UNKNOWN: return "UNKNOWN";
    case BASERT_ERR_INVALID_ARGUMENT: return "INVALID_ARGUMENT";
    case BASERT_ERR_FILE_NOT_FOUND: return "FILE_NOT_FOUND";
    case BASERT_ERR_INVALID_FORMAT: return "INVALID_FORMAT";
    case BASERT_ERR_UNSUPPORTED: return "UNSUPPORTED";
    case BASERT_ERR_OUT_OF_MEMORY: return "OUT_OF_MEMORY";
    case BASERT_ERR_GPU: return "GPU";
    case BASERT_ERR_GENERATION_FAILED: return "GENERATION_FAILED";
    }
    return "UNKNOWN";
}

/* ---- model file ---- */

static uint32_t rd32(const unsigned char *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

static unsigned char *read_file(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        set_error(BASERT_ERR_FILE_NOT_FOUND, "cannot open model file %s", path);
        return NULL;
    }
    unsigned char *buf = malloc(REF_MAX_FILE + 1);
    if (!buf) {
        fclose(f);
        set_error(BASERT_ERR_OUT_OF_MEMORY, "out of memory reading %s", path);
        return NULL;
    }
    size_t n = fread(buf, 1, REF_MAX_FILE + 1, f);
    fclose(f);
    if (n > REF_MAX_FILE) {
        free(buf);
        set_error(BASERT_ERR_INVALID_FORMAT, "model file %s is larger than 16 MiB", path);
        return NULL;
    }
    *size = n;
    return buf;
}

static void free_model(RefModel *m) {
    if (!m) return;
    for (uint32_t i = 0; m->words && i < m->vocab_size; i++) free(m->words[i]);
    for (uint32_t i = 0; m->pieces && i < m->vocab_size; i++) free(m->pieces[i]);
    free(m->words);
    free(m->pieces);
    free(m->next);
    free(m);
}

static void fill_config(RefConfig *c, const unsigned char *h, int max_context) {
    BaseRTModelConfig *b = &c->base;
    memset(c, 0, sizeof *c);
    b->dim = rd32(h + 12);
    b->n_layers = rd32(h + 16);
    b->n_heads = rd32(h + 20);
    b->n_kv_heads = b->n_heads;
    b->head_dim = b->n_heads ? b->dim / b->n_heads : 0;
    b->q_dim = b->dim;
    b->kv_dim = b->dim;
    b->ffn_dim = 4 * b->dim;
    b->vocab_size = rd32(h + 8);
    b->max_seq_len = rd32(h + 24);
    if (max_context > 0 && (uint32_t)max_context < b->max_seq_len) b->max_seq_len = (uint32_t)max_context;
    b->norm_eps = 1e-5f;
    b->rope_theta = 10000.0f;
    memcpy(b->architecture, h + 40, 31);
    for (uint32_t i = 0; i < b->n_layers && i < 128; i++) {
        b->ffn_dims[i] = b->ffn_dim;
        b->n_kv_heads_per_layer[i] = b->n_kv_heads;
    }
    /* the last fields of the layout, so a reader that cuts short is seen */
    b->swiglu_alpha = 1.702f;
    b->attention_bias = 1;
    b->rope_yarn_truncate = 1;
#if defined(REF_CONFIG_EXTRA)
    for (unsigned i = 0; i < REF_CONFIG_EXTRA; i++) c->extra[i] = 0xE0E0E000u + i + 1;
#endif
}

static RefModel *parse_model(const char *path, const unsigned char *d, size_t size, int max_context) {
    if (size < 4 || memcmp(d, "BASE", 4) != 0) {
        set_error(BASERT_ERR_INVALID_FORMAT, "%s is not a baseRT model (no BASE magic at offset 0)", path);
        return NULL;
    }
    if (size < REF_HEADER || rd32(d + 4) != 1) {
        set_error(BASERT_ERR_INVALID_FORMAT, "%s: unsupported or truncated model header", path);
        return NULL;
    }
    uint32_t vocab = rd32(d + 8), bos = rd32(d + 28), eos = rd32(d + 32), unk = rd32(d + 36);
    if (vocab == 0 || vocab > REF_MAX_VOCAB || bos >= vocab || eos >= vocab || unk >= vocab) {
        set_error(BASERT_ERR_INVALID_FORMAT, "%s: vocabulary header out of range", path);
        return NULL;
    }
    RefModel *m = calloc(1, sizeof *m);
    if (!m) goto oom;
    m->vocab_size = vocab;
    m->bos = bos;
    m->eos = eos;
    m->unk = unk;
    m->words = calloc(vocab, sizeof *m->words);
    m->pieces = calloc(vocab, sizeof *m->pieces);
    m->next = calloc(vocab, sizeof *m->next);
    if (!m->words || !m->pieces || !m->next) goto oom;
    size_t off = REF_HEADER;
    for (uint32_t i = 0; i < vocab; i++) {
        if (off >= size || off + 1 + d[off] > size) goto truncated;
        size_t len = d[off];
        m->words[i] = malloc(len + 1);
        m->pieces[i] = malloc(len + 2);
        if (!m->words[i] || !m->pieces[i]) goto oom;
        memcpy(m->words[i], d + off + 1, len);
        m->words[i][len] = '\0';
        if (i == bos || i == eos) {
            m->pieces[i][0] = '\0';
        } else {
            m->pieces[i][0] = ' ';
            memcpy(m->pieces[i] + 1, d + off + 1, len);
            m->pieces[i][len + 1] = '\0';
        }
        off += 1 + len;
    }
    if (size - off < (size_t)vocab * 4) goto truncated;
    for (uint32_t i = 0; i < vocab; i++) {
        m->next[i] = rd32(d + off + 4 * (size_t)i);
        if (m->next[i] >= vocab) {
            set_error(BASERT_ERR_INVALID_FORMAT, "%s: next-token table names a token outside the vocabulary", path);
            free_model(m);
            return NULL;
        }
    }
    fill_config(&m->config, d, max_context);
    return m;
truncated:
    set_error(BASERT_ERR_INVALID_FORMAT, "%s: model file is truncated", path);
    free_model(m);
    return NULL;
oom:
    set_error(BASERT_ERR_OUT_OF_MEMORY, "out of memory loading %s", path);
    free_model(m);
    return NULL;
}

/* ---- lifecycle ---- */

REF_EXPORT baseRT_model_t baseRT_load_model(const char *model_path, const char *kernel_library_path,
                                            int max_context) {
    (void)kernel_library_path;
    if (!model_path) {
        set_error(BASERT_ERR_INVALID_ARGUMENT, "%s", "model path is NULL");
        return NULL;
    }
    size_t size = 0;
    unsigned char *data = read_file(model_path, &size);
    if (!data) return NULL;
    RefModel *m = parse_model(model_path, data, size, max_context);
    free(data);
    if (m) clear_error();
    return m;
}

REF_EXPORT void baseRT_free_model(baseRT_model_t model) { free_model((RefModel *)model); }

REF_EXPORT size_t baseRT_device_memory_budget(void) {
    const char *v = getenv("BASERT_REF_DEVICE_BUDGET");
    return v && *v ? (size_t)strtoull(v, NULL, 10) : 0;
}

/* ---- configuration ---- */

REF_EXPORT RefConfig baseRT_get_config(baseRT_model_t model) {
    RefConfig c;
    ref_get_config_calls++;
    const char *marker = getenv("BASERT_REF_GET_CONFIG_MARKER");
    if (marker && *marker) {
        FILE *f = fopen(marker, "a");
        if (f) {
            fprintf(f, "baseRT_get_config called in %s (returns %zu bytes)\n", REF_VARIANT, sizeof c);
            fclose(f);
        }
    }
    if (model) {
        c = ((RefModel *)model)->config;
    } else {
        memset(&c, 0, sizeof c);
    }
    return c;
}

#if defined(REF_CONFIG_INTO)
REF_EXPORT size_t baseRT_get_config_into(baseRT_model_t model, void *out, size_t out_size) {
    RefConfig zero;
    const RefConfig *src = model ? &((RefModel *)model)->config : &zero;
    if (!model) memset(&zero, 0, sizeof zero);
    if (out) {
        size_t n = out_size < sizeof(RefConfig) ? out_size : sizeof(RefConfig);
        memcpy(out, src, n);
        if (out_size > n) memset((unsigned char *)out + n, 0, out_size - n);
    }
    return sizeof(RefConfig);
}
#endif

/* ---- tokenization ---- */

static int is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

REF_EXPORT int baseRT_encode(baseRT_model_t model, const char *text, uint32_t *out_tokens, int max_tokens) {
    RefModel *m = model;
    if (!m || !text || (max_tokens > 0 && !out_tokens) || max_tokens < 0) {
        set_error(BASERT_ERR_INVALID_ARGUMENT, "%s", "baseRT_encode: bad arguments");
        return -1;
    }
    int n = 0;
    const char *p = text;
    while (*p) {
        while (*p && is_space(*p)) p++;
        if (!*p) break;
        const char *start = p;
        while (*p && !is_space(*p)) p++;
        size_t len = (size_t)(p - start);
        uint32_t id = m->unk;
        for (uint32_t i = 0; i < m->vocab_size; i++) {
            if (i != m->bos && i != m->eos && strlen(m->words[i]) == len && memcmp(m->words[i], start, len) == 0) {
                id = i;
                break;
            }
        }
        if (n >= max_tokens) {
            set_error(BASERT_ERR_INVALID_ARGUMENT, "%s", "baseRT_encode: out_tokens is too small");
            return -1;
        }
        out_tokens[n++] = id;
    }
    clear_error();
    return n;
}

REF_EXPORT const char *baseRT_decode_token(baseRT_model_t model, uint32_t token) {
    RefModel *m = model;
    if (!m || token >= m->vocab_size) {
        set_error(BASERT_ERR_INVALID_ARGUMENT, "%s", "baseRT_decode_token: no such token");
        return "";
    }
    return m->pieces[token];
}

REF_EXPORT uint32_t baseRT_bos_id(baseRT_model_t model) { return model ? ((RefModel *)model)->bos : 0; }

REF_EXPORT uint32_t baseRT_eos_token_id(baseRT_model_t model) { return model ? ((RefModel *)model)->eos : 0; }

/* ---- generation: greedy over the next-token table ---- */

REF_EXPORT uint32_t baseRT_prefill(baseRT_model_t model, const uint32_t *tokens, int n_tokens) {
    RefModel *m = model;
    if (!m || !tokens || n_tokens <= 0) {
        set_error(BASERT_ERR_INVALID_ARGUMENT, "%s", "baseRT_prefill: no tokens");
        return m ? m->eos : 0;
    }
    if ((uint32_t)n_tokens >= m->config.base.max_seq_len) {
        set_error(BASERT_ERR_GENERATION_FAILED, "%s", "baseRT_prefill: prompt exceeds the context");
        return m->eos;
    }
    uint32_t last = tokens[n_tokens - 1];
    if (last >= m->vocab_size) {
        set_error(BASERT_ERR_INVALID_ARGUMENT, "%s", "baseRT_prefill: token outside the vocabulary");
        return m->eos;
    }
    m->position = n_tokens;
    clear_error();
    return m->next[last];
}

#if !defined(REF_OMIT_DECODE_STEP)
REF_EXPORT uint32_t baseRT_decode_step(baseRT_model_t model, uint32_t token, int position) {
    RefModel *m = model;
    if (!m || token >= m->vocab_size || position < 0) {
        set_error(BASERT_ERR_INVALID_ARGUMENT, "%s", "baseRT_decode_step: bad arguments");
        return m ? m->eos : 0;
    }
    if ((uint32_t)position + 1 >= m->config.base.max_seq_len) {
        return m->eos; /* the context is full: stop */
    }
    m->position = position + 1;
    clear_error();
    return m->next[token];
}
#endif
