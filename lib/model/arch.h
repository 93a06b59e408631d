// Architectures as data: everything the shared block recipe needs to know about one GGUF
// `general.architecture`. Adding an architecture means adding a row to kArchs (arch.cpp) that
// states only what differs from a plain Llama block; every default below is Llama's.
//
// Blocks that are not "a Llama block plus switches":
// - A block is two halves, a mixer and an FFN, each a unit of residency (loader/block.h). What a
//   layer's mixer IS is a per-layer MixerKind, not a flag: ModelConfig::layer_kind holds one per
//   layer, filled from the metadata llama.cpp reads for the architecture (qwen35's
//   `attention.recurrent_layers` array or `full_attention_interval`), ATTENTION everywhere else.
//   Architectures whose FFN differs per layer the same way (dense layers before MoE ones) will get
//   an FfnKind per layer by the same route.
// - The block recipe (model/forward.cpp) dispatches once per layer on the kind: `attention_half`
//   is the ATTENTION recipe; every other kind is its own function in its own file
//   (model/mixer_<kind>.cpp) with the same signature (h in place over a chunk of positions, weights
//   leased from the BlockStreamer), so the switch lives in one place and no `if (arch == X)`
//   enters the attention math. Options that vary within a kind (sinks, output gate, QK-norm,
//   partial rotary) stay ArchSpec fields read by that kind's recipe.
// - A kind declares its tensor roles (loader/block.h: RoleTraits::kinds; a role belongs to one
//   half) and its per-session state: ATTENTION keeps KV rows per position (model/kv_cache), a
//   recurrent kind a fixed-size state per layer (conv window + recurrent matrix,
//   model/recurrent_state) that never streams. The session's KvCache owns both, sized per layer by
//   kind, so memory plans, saved states, truncation and speculation ask the kind, not the arch.
// - Per-layer shapes (a different head dim on windowed layers, per-layer head counts) are data of
//   the layer (LayerShape in ModelConfig), read by role_shape() and the recipe, not new flags.
#pragma once

#include <cstdint>
#include <string>

#include "loader/block.h"  // MixerKind

namespace llm {

enum class NormKind : uint8_t { RMS, LAYER /* with bias */ };
enum class RopeKind : uint8_t {
    NONE,
    NORM,    // adjacent pairs
    NEOX,    // halves
    IMROPE,  // halves, each pair's angle from one of the position's sections (qwen35's interleaved M-RoPE)
};
// Gated DeltaNet layers with fewer key heads than value heads: which key head value head j reads.
enum class GdnHeadMap : uint8_t {
    TILED,        // j % n_k_heads (qwen35: the converter reorders its value heads to this)
    INTERLEAVED,  // j / (n_v_heads / n_k_heads) (qwen3next: a repeat-interleave of the key heads)
};
enum class FfnKind : uint8_t {
    SWIGLU,        // down(silu(gate·x) ⊙ up·x)
    GEGLU,         // down(gelu(gate·x) ⊙ up·x)
    SWIGLU_FUSED,  // u = up·x with 2·n_ff rows: down(silu(u[:n_ff]) ⊙ u[n_ff:])
    GELU,          // down(gelu(up·x))
    // gpt-oss's experts: down(g·σ(1.702·g) ⊙ (u + 1)) with g = min(gate·x, 7), u = clamp(up·x, ±7).
    SWIGLU_OAI,
};
// How the chosen experts' weights come from the router's logits.
enum class ExpertWeights : uint8_t {
    SOFTMAX_NORM,  // softmax over all experts, the top-k's probabilities renormalised to sum 1
    SOFTMAX_TOPK,  // top-k of the logits, then a softmax over just those k (gpt-oss)
};
// Where the attention's 1/√d goes. Both give the same scores up to rounding, but llama.cpp rounds
// them differently per architecture, and the goldens see the difference.
enum class QScale : uint8_t {
    SOFTMAX,   // scores scaled by 1/√head_dim inside the softmax (llama, qwen2, gpt2)
    PRESCALE,  // q multiplied by 1/√head_dim before the dot products (phi2, phi3, gemma)
    NONE,      // scores used as they are: the q/k norms set their scale (gemma4's attention scale 1)
};

struct ArchSpec {
    const char *name = "";

    // The block.
    NormKind norm = NormKind::RMS;
    FfnKind ffn = FfnKind::SWIGLU;
    bool parallel_residual = false;  // attention and FFN both read one norm of h (phi2)
    bool post_norms = false;         // RMSNorm after attention and after the FFN (gemma)
    bool qk_norm = false;            // per-head RMSNorm of q and k before RoPE (gemma3)
    bool v_norm = false;             // per-head RMSNorm of v, without a weight (gemma4)
    // A layer without attn_v takes its values from the keys' projection, before the k norm and RoPE
    // (gemma4's full-attention layers: attention_k_eq_v).
    bool v_from_k = false;
    // head_count_kv and feed_forward_length may differ per layer; windowed layers have their own
    // head dim and rotary dims (attention.key_length_swa, rope.dimension_count_swa) (gemma4).
    bool per_layer_shapes = false;
    bool moe_allowed = false;             // expert_count > 0 turns the FFN into routed experts (Mixtral)
    bool moe_required = false;            // expert_count must be > 0 (qwen3moe)
    bool reads_expert_ff_length = false;  // expert_feed_forward_length sizes the experts (qwen3moe)
    ExpertWeights expert_weights = ExpertWeights::SOFTMAX_NORM;
    // The router and every expert matrix carry a bias (ffn_gate_inp.bias, ffn_{gate,up,down}_exps.bias),
    // required; the experts' biases added per chosen expert (gpt-oss).
    bool moe_biases = false;
    // The experts' gate and up are one tensor, ffn_gate_up_exps [n_embd, 2·n_ff_exp, n_expert], gate
    // rows first (gemma4).
    bool experts_fused_gate_up = false;
    // A dense MLP runs beside the experts: post_ffw_norm_1(MLP(ffn_norm(h))) +
    // post_ffw_norm_2(experts(pre_ffw_norm_2(h))), the router reading rms_norm(h)/√n_embd ⊙
    // ffn_gate_inp.scale (gemma4's 26B-A4B).
    bool moe_dense_branch = false;
    // embedding_length_per_layer_input > 0 adds per-layer token embeddings (per_layer_token_embd,
    // streamed by rows, with per_layer_model_proj) and each layer's inp_gate/proj/post_norm step;
    // attention.shared_kv_layers trailing layers attend to an earlier layer's cache (gemma4's E2B/E4B).
    bool per_layer_embd = false;
    bool kv_sharing = false;
    // A shared expert beside the routed ones: SwiGLU over ffn_{gate,up,down}_shexp of width
    // expert_shared_feed_forward_length, times sigmoid(ffn_gate_inp_shexp · x) (qwen35moe, qwen3next).
    bool shared_expert = false;
    // The FFN's input norm is stored as post_attention_norm.weight (HF's name; qwen35, qwen3next).
    bool ffn_norm_named_post_attention = false;

    // Hybrid layer pattern: layers are GATED_DELTA_NET except where `attention.recurrent_layers`
    // (or, without it, `full_attention_interval`, default 4: every 4th layer) says attention.
    bool reads_recurrent_layers = false;
    GdnHeadMap gdn_head_map = GdnHeadMap::TILED;
    bool gdn_fused_ba = false;  // one ssm_ba projection, per key head [beta | alpha] (qwen3next)
    // The attention's q projection is joint [q | gate] per head, and its output is multiplied by
    // sigmoid(gate) before attn_output (qwen35's gated attention).
    bool attn_output_gate = false;
    // nextn_predict_layers trailing blocks are a multi-token-prediction head: bound and never run,
    // as llama.cpp does without its MTP drafting (qwen35).
    bool reads_nextn = false;

    // Positions.
    RopeKind rope = RopeKind::NORM;
    bool rope_dims_equal_head = false;  // rope.dimension_count must equal the head dimension (llama)
    bool position_embd = false;         // learned absolute positions added to the embeddings (gpt2)
    uint32_t no_rope_layer_step = 0;    // layer il skips RoPE when (il + 1) % n == 0 (smollm3); 0: never
    bool rope_freqs_tensor = false;     // a global rope_freqs.weight divides each frequency (llama 3)
    bool rope_freqs_full_only = false;  // ... on full-attention layers only (gemma4's proportional RoPE)
    bool longrope_tensors = false;      // rope_factors_long/short.weight, chosen per context (LongRoPE)
    // YaRN's rope.scaling.yarn_beta_fast / _slow and yarn_log_multiplier (HF's mscale_all_dim) are
    // read and applied (mistral3); elsewhere a value other than llama.cpp's default is refused.
    bool reads_yarn_extras = false;

    // Attention scores.
    QScale q_scale = QScale::SOFTMAX;
    // A model with exactly this many layers (Gemma's 27B variants, as llama.cpp identifies them)
    // scales q by 1/√(n_embd/n_head) instead of 1/√head_dim. 0: never.
    uint32_t q_scale_embd_per_head_at_n_layer = 0;
    float attn_softcap = 0.0f;   // default attention logit soft-cap when the key is absent (0: none)
    float final_softcap = 0.0f;  // default final logit soft-cap when the key is absent (0: none)
    // A learned logit per query head (attn_sinks.weight) that joins every softmax's max and
    // denominator but has no value: attention may put weight on nothing (gpt-oss).
    bool attn_sinks = false;
    // Llama 4's attention temperature: q times 1 + s·ln(⌊pos / n_ctx_orig⌋ + 1), s from
    // attention.temperature_scale when the file has it (mistral3).
    bool reads_attn_temperature = false;

    // Sliding-window attention. Architectures that do not read the keys ignore them, as llama.cpp
    // does (Mistral and Phi-3 files carry a window that llama.cpp never applies).
    bool reads_swa = false;
    uint32_t swa_pattern = 0;  // default sliding_window_pattern n: layer il slides iff il % n < n - 1
    // sliding_window_pattern is one flag per layer (a BOOL array; a scalar flags every layer alike),
    // and attention.sliding_window is required (gemma4).
    bool swa_pattern_per_layer = false;
    uint32_t swa_window = 0;         // default window when the key is absent (0: no SWA)
    float swa_rope_base = 0.0f;      // default RoPE base of sliding layers (0: the global base)
    bool swa_rope_unscaled = false;  // sliding layers ignore RoPE scaling (gemma3)
    // attention.sliding_window must be present (gpt-oss).
    bool swa_window_required = false;

    // Embeddings and head.
    bool embed_scale_sqrt = false;    // embeddings × √n_embd (gemma)
    bool output_tied_always = false;  // output.weight is never read: token_embd is the head (gemma2)
    // RANK pooling (a classifier head, cls.*): llama.cpp scores the last token and ends with a
    // softmax over the classifier's outputs for these (Qwen3 rerankers); others score the first.
    bool rank_last_softmax = false;
};

// The names info_json and logs use; one per enum, a switch without default so a new value warns.
const char *name(NormKind k);
const char *name(RopeKind k);
const char *name(FfnKind k);
const char *name(QScale k);
const char *name(ExpertWeights k);

// nullptr for architectures we do not run.
const ArchSpec *find_arch(const std::string &name);
std::string supported_archs();

}  // namespace llm
