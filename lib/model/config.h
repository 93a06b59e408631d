// Hyper-parameters of a model, read from GGUF metadata with llama.cpp's exact-type rules.
#pragma once

#include <cstdint>
#include <string>

#include "gguf/metadata.h"
#include "model/arch.h"

namespace llm {

struct ModelConfig {
    std::string arch_name;
    const ArchSpec *arch = nullptr;
    uint32_t n_ctx_train = 0;
    uint32_t n_embd = 0;
    uint32_t n_layer = 0;
    uint32_t n_head = 0;
    uint32_t n_head_kv = 0;
    uint32_t n_ff = 0;
    uint32_t head_dim = 0;     // key_length (= value_length for the archs we run)
    uint32_t n_rot = 0;
    float norm_eps = 1e-5f;
    float rope_base = 10000.0f;
    float rope_freq_scale = 1.0f;
    uint32_t n_vocab = 0;      // filled from the token embedding

    uint32_t n_q() const { return n_head * head_dim; }
    uint32_t n_kv() const { return n_head_kv * head_dim; }
};

// Throws LLM_ERR_UNSUPPORTED for unknown architectures, LLM_ERR_FORMAT for bad hparams.
ModelConfig read_config(const Metadata &meta);

}  // namespace llm
