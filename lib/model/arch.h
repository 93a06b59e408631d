// Architectures as data: everything the shared block recipe needs to know about one GGUF
// `general.architecture`. Adding an architecture means adding a row here, not a code path.
#pragma once

#include <cstdint>
#include <string>

namespace llm {

enum class NormKind : uint8_t { RMS, LAYER /* with bias */ };
enum class RopeKind : uint8_t { NONE, NORM /* adjacent pairs */, NEOX /* halves */ };
enum class FfnKind : uint8_t {
    SWIGLU,        // down(silu(gate·x) ⊙ up·x)
    GEGLU,         // down(gelu(gate·x) ⊙ up·x)
    SWIGLU_FUSED,  // u = up·x with 2·n_ff rows: down(silu(u[:n_ff]) ⊙ u[n_ff:])
    GELU,          // down(gelu(up·x))
};
enum class QScale : uint8_t {
    SOFTMAX,       // scores scaled by 1/√hd inside the softmax (llama, qwen2, gpt2)
    PRESCALE,      // q multiplied by 1/√hd before the dot products (phi2, phi3)
    PRESCALE_GEMMA // as PRESCALE, but 1/√(n_embd/n_head) for the largest Gemma variants
};

struct ArchSpec {
    const char *name;
    NormKind norm;
    RopeKind rope;
    FfnKind ffn;
    QScale q_scale;
    bool parallel_residual;     // phi2: attention and FFN both read one norm of h
    bool post_norms;            // gemma: RMSNorm after attention and after the FFN
    bool qk_norm;               // gemma3: per-head RMSNorm of q and k before RoPE
    bool embed_scale_sqrt;      // gemma: embeddings × √n_embd
    bool position_embd;         // gpt2: learned absolute positions
    bool output_tied_always;    // gemma2: no output.weight, token_embd is the head
    bool rope_dims_equal_head;  // llama: rope.dimension_count must equal the head dim
    bool reads_swa;             // sliding-window keys are honoured (gemma); others ignore them
    uint32_t swa_pattern;       // default sliding_window_pattern: layer il slides iff il % n < n - 1
    uint32_t swa_window;        // default window when the key is absent (0: no SWA)
    float swa_rope_base;        // default rope base of sliding layers (0: same as global)
    bool swa_rope_unscaled;     // sliding layers ignore rope scaling (gemma3)
    float attn_softcap;         // default attention logit soft-cap (0: none)
    float final_softcap;        // default final logit soft-cap (0: none)
    bool moe_allowed;           // expert_count > 0 is meaningful (Mixtral)
    // Gemma's Q scale depends on the model size, identified by its layer count.
    uint32_t gemma_big_n_layer;
};

// nullptr for architectures we do not run.
const ArchSpec *find_arch(const std::string &name);
std::string supported_archs();

}  // namespace llm
