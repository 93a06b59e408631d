#include "model/arch.h"

namespace llm {
namespace {

using N = NormKind;
using R = RopeKind;
using F = FfnKind;
using Q = QScale;

// name       norm     rope     ffn              q scale      par    post   qkn    emb√   pos    tied   rope=hd swa   pat win   swa-base unscl  attn-cap final-cap moe   gemma-big
constexpr ArchSpec kArchs[] = {
    // llama also covers Mistral-labelled files, llama3's rope_freqs (a tensor, not a flag) and
    // Mixtral (expert_count > 0).
    {"llama",  N::RMS,   R::NORM, F::SWIGLU,       Q::SOFTMAX,  false, false, false, false, false, false, true,  false, 0, 0,    0.0f,    false, 0.0f,  0.0f,  true,  0},
    {"qwen2",  N::RMS,   R::NEOX, F::SWIGLU,       Q::SOFTMAX,  false, false, false, false, false, false, false, false, 0, 0,    0.0f,    false, 0.0f,  0.0f,  false, 0},
    {"gemma2", N::RMS,   R::NEOX, F::GEGLU,        Q::PRESCALE_GEMMA, false, true, false, true, false, true, false, true, 2, 4096, 0.0f,    false, 50.0f, 30.0f, false, 46},
    {"gemma3", N::RMS,   R::NEOX, F::GEGLU,        Q::PRESCALE_GEMMA, false, true, true, true, false, false, false, true, 6, 0,   10000.0f, true,  0.0f,  0.0f,  false, 62},
    {"phi3",   N::RMS,   R::NEOX, F::SWIGLU_FUSED, Q::PRESCALE, false, false, false, false, false, false, false, false, 0, 0,    0.0f,    false, 0.0f,  0.0f,  false, 0},
    {"phi2",   N::LAYER, R::NEOX, F::GELU,         Q::PRESCALE, true,  false, false, false, false, false, false, false, 0, 0,    0.0f,    false, 0.0f,  0.0f,  false, 0},
    {"gpt2",   N::LAYER, R::NONE, F::GELU,         Q::SOFTMAX,  false, false, false, false, true,  false, false, false, 0, 0,    0.0f,    false, 0.0f,  0.0f,  false, 0},
};

}  // namespace

const ArchSpec *find_arch(const std::string &name) {
    for (const ArchSpec &a : kArchs)
        if (name == a.name) return &a;
    return nullptr;
}

std::string supported_archs() {
    std::string s;
    for (const ArchSpec &a : kArchs) s += (s.empty() ? "" : ", ") + std::string(a.name);
    return s;
}

}  // namespace llm
