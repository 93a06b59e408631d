#include "model/forward.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <shared_mutex>

#include "core/error.h"
#include "core/thread_pool.h"
#include "kernels/blocks.h"
#include "kernels/fp16.h"
#include "model/block_ops.h"
#include "model/mixer.h"
#include "model/rope.h"

namespace llm {

void Scratch::ensure(const ModelConfig &c, int64_t P, int64_t W, int64_t head_rows) {
    auto fit = [](std::vector<float> &b, size_t n) {
        if (b.size() < n) b.resize(n);
    };
    // The residual stream spans the chunk. A streamed matrix is read once per chunk and the matrices
    // are leased one at a time, so their inputs and outputs span W positions (the chunk when any unit
    // is streamed, else a sub-batch); what only one sub-batch's matmul needs at a time does not.
    const int64_t S = std::min(P, kSubBatch);
    fit(h, P * c.n_embd);
    fit(x, W * c.n_embd);
    fit(q, W * c.n_q());
    fit(k, W * c.n_kv());
    fit(v, W * c.n_kv());
    fit(att, W * c.n_q());
    fit(o, S * c.n_embd);
    fit(f, S * c.n_embd);
    if (c.n_expert == 0 || c.arch->moe_dense_branch) {
        fit(gate, W * c.n_ff_max());
        fit(up, S * (c.arch->ffn == FfnKind::SWIGLU_FUSED ? 2 : 1) * c.n_ff_max());
    }
    if (c.n_expert > 0 && c.arch->moe_dense_branch) {
        fit(sh_out, W * c.n_embd);
        fit(moe_x, W * c.n_embd);
        fit(router_x, S * c.n_embd);
    }
    fit(logits_in, head_rows * c.n_embd);
    if (c.arch->attn_output_gate) {
        fit(qg, W * 2 * c.n_q());
        fit(att_gate, W * c.n_q());
    }
    if (c.has_recurrent()) {
        const GdnShape &g = c.gdn;
        fit(gdn_qkv, W * g.conv_channels());
        fit(gdn_z, W * g.value_dim());
        fit(gdn_beta, W * 2 * g.n_v_heads);  // room for a fused [beta | alpha] projection
        fit(gdn_g, W * g.n_v_heads);
        fit(gdn_y, W * g.value_dim());
    }
    if (c.arch->shared_expert) {
        fit(sh_gate, W * c.n_ff_shexp);
        fit(sh_up, S * c.n_ff_shexp);
        fit(sh_out, W * c.n_embd);
    }
    if (c.n_embd_per_layer > 0) {
        fit(ple, P * c.n_layer * c.n_embd_per_layer);
        fit(ple_g, W * c.n_embd_per_layer);
    }
    if (c.arch->parallel_residual) {
        fit(par_x, P * c.n_embd);
        fit(par_o, P * c.n_embd);
    }
}

namespace {

// GELU (tanh form) the way ggml's CPU backend evaluates it: through a table of f16 results indexed
// by the f16 rounding of x, exact outside (-10, 10). ggml's table is compiled with FMA contraction
// (GCC's and Clang's default where the target has FMA): 1 + 0.044715·x·x is one fma. Of the 65,536
// entries only x = -1.9990234375 rounds otherwise without it (-0.045471 instead of -0.045502).
float gelu(float x) {
    static const std::vector<uint16_t> table = [] {
        std::vector<uint16_t> t(65536);
        for (uint32_t i = 0; i < 65536; ++i) {
            const float v = fp16_to_f32(static_cast<uint16_t>(i));
            const float inner = std::fma(0.044715f * v, v, 1.0f);
            const float g = 0.5f * v * (1.0f + std::tanh(0.79788456080286535587989211986876f * v * inner));
            t[i] = f32_to_fp16(g);
        }
        return t;
    }();
    if (x <= -10.0f) return 0.0f;
    if (x >= 10.0f) return x;
    return fp16_to_f32(table[f32_to_fp16(x)]);
}

// Attention scores of one KV head's `group` query heads (q: [group][hd], f32) against the cached keys
// of positions first .. first+n_keys-1: sc[g·n_keys + t]. As llama.cpp's CPU backend (flash attention
// off) computes K·q for the cache's type: an F16 or Q8_0 cache meets q converted as a matmul converts
// activations for weights of that type (to f16; to Q8_0 blocks), an F32 one meets q itself.
void attention_scores(const KvCache &kv, uint32_t layer, int kvh, int hd, int32_t first, int64_t n_keys, const float *q,
                      int group, float *sc) {
    const KvType t = kv.type_k();
    const int64_t n_kv = kv.n_kv(layer);
    // A ring hands out the positions in at most two runs of consecutive rows.
    auto runs = [&](auto &&fn) {
        for (int64_t t0 = 0; t0 < n_keys;) {
            const int32_t pos = first + static_cast<int32_t>(t0);
            const int64_t len = std::min<int64_t>(n_keys - t0, kv.run_length(layer, pos));
            fn(t0, pos, len);
            t0 += len;
        }
    };
    if (t == KvType::F32) {
        runs([&](int64_t t0, int32_t pos, int64_t len) {
            const float *k0 = reinterpret_cast<const float *>(kv.k_row(layer, pos)) + static_cast<int64_t>(kvh) * hd;
            dot_rows_f32(k0, n_kv, len, q, hd, group, hd, sc + t0, n_keys);
        });
        return;
    }
    if (t == KvType::F16 || hd % QK == 0) {
        const TensorType wt = t == KvType::F16 ? TensorType::F16 : TensorType::Q8_0;
        const uint64_t head_bytes = kv_row_bytes(t, hd);  // a head starts on a block boundary
        const ActRows qa = convert_act_rows({wt, nullptr, hd, 0, 0}, q, group);
        runs([&](int64_t t0, int32_t pos, int64_t len) {
            const WeightView w{wt, kv.k_row(layer, pos) + static_cast<uint64_t>(kvh) * head_bytes, hd, len,
                               kv.row_bytes_k(layer)};
            dot_rows(w, qa, group, sc + t0, n_keys);
        });
        return;
    }
    // Q8_0 with heads that split blocks (head_dim not a multiple of 32; llama.cpp refuses this
    // shape): the dequantized keys against f32 q.
    thread_local std::vector<float> kf;
    kf.resize(static_cast<size_t>(n_keys * hd));
    for (int64_t i = 0; i < n_keys; ++i)
        kv.read_k(layer, first + static_cast<int32_t>(i), static_cast<int64_t>(kvh) * hd, hd, &kf[i * hd]);
    dot_rows_f32(kf.data(), hd, n_keys, q, hd, group, hd, sc, n_keys);
}

// Σ_t p[g·n_keys + t] · v_t over the cached f32 or f16 values of positions first .. first+n_keys-1,
// in llama.cpp's accumulator order: one call over all rows, a ring's two runs read in place.
template <typename V>
void value_sum(const KvCache &kv, uint32_t layer, int kvh, int hd, int32_t first, int64_t n_keys, const float *p,
               int group, float *out) {
    auto head = [&](int32_t pos) {
        return reinterpret_cast<const V *>(kv.v_row(layer, pos)) + static_cast<int64_t>(kvh) * hd;
    };
    const int64_t n_first = std::min<int64_t>(n_keys, kv.run_length(layer, first));
    const V *second = n_first < n_keys ? head(first + static_cast<int32_t>(n_first)) : nullptr;
    if constexpr (sizeof(V) == 2)
        weighted_sum_rows_f16(p, n_keys, group, head(first), kv.n_kv(layer), n_keys, hd, out, hd, second, n_first);
    else
        weighted_sum_rows(p, n_keys, group, head(first), kv.n_kv(layer), n_keys, hd, out, hd, second, n_first);
}

// out[g·hd + d] = Σ_t p[g·n_keys + t] · v_t[d] over the cached values of positions first ..
// first+n_keys-1, for the cache's type: an F16 cache meets p rounded to f16 (llama.cpp converts the
// probabilities for its F16 V·P product); a Q8_0 cache's values are widened to f32 and meet p as is.
void attention_values(const KvCache &kv, uint32_t layer, int kvh, int hd, int32_t first, int64_t n_keys, float *p,
                      int group, float *out) {
    switch (kv.type_v()) {
    case KvType::F32: return value_sum<float>(kv, layer, kvh, hd, first, n_keys, p, group, out);
    case KvType::F16:
        round_f16_rows(p, group * n_keys);
        return value_sum<uint16_t>(kv, layer, kvh, hd, first, n_keys, p, group, out);
    case KvType::Q8_0: {
        thread_local std::vector<float> vf;
        vf.resize(static_cast<size_t>(n_keys * hd));
        for (int64_t i = 0; i < n_keys; ++i)
            kv.read_v(layer, first + static_cast<int32_t>(i), static_cast<int64_t>(kvh) * hd, hd, &vf[i * hd]);
        return weighted_sum_rows(p, n_keys, group, vf.data(), hd, n_keys, hd, out, hd);
    }
    }
}

// Causal attention of P queries (positions pos0..pos0+P-1) over the cache of one layer, with the
// layer's sliding window and the architecture's score scale and soft-cap. The keys and values of
// the P positions are stored first, kKvWriteBatch positions at a time just before their queries read
// the cache: a windowed layer's ring is sized for that (kv_ring_positions). Every path (prefill,
// decode, batched segments, speculative verification; any cache type) comes through here. k null: the
// layer reads a cache that an earlier layer of this pass has written (a KV-shared layer; `layer` is
// that one).
// q: [P][n_head*hd], k, v: [P][n_kv], sinks: [n_head] or null -> out: [P][n_head*hd]
void attention(const ModelConfig &c, KvCache &kv, uint32_t layer, const float *q, const float *k, const float *v,
               const float *sinks, float *out, int64_t P, int32_t pos0, ThreadPool *pool) {
    const int hd = static_cast<int>(c.hd(layer));
    const int64_t n_head_kv = c.n_head_kv_of(layer), nq = c.n_q(layer);
    const int group = static_cast<int>(c.n_head / n_head_kv);
    const int32_t window = c.is_swa(layer) ? static_cast<int32_t>(c.swa_window) : 0;
    const float cap = c.attn_softcap;
    const int64_t n_kv = c.n_kv(layer);
    for (int64_t b0 = 0; b0 < P; b0 += kKvWriteBatch) {
        const int64_t n = std::min(kKvWriteBatch, P - b0);
        if (k)
            for (int64_t p = b0; p < b0 + n; ++p)
                kv.store(layer, pos0 + static_cast<int32_t>(p), k + p * n_kv, v + p * n_kv);
        // One job per (position, KV head): the `group` query heads sharing that KV head meet its
        // keys in one tiled pass (sc: [group][n_keys]).
        auto work = [&](int64_t j0, int64_t j1) {
            thread_local std::vector<float> sc;
            for (int64_t j = j0; j < j1; ++j) {
                const int64_t p = b0 + j / n_head_kv;
                const int kvh = static_cast<int>(j % n_head_kv);
                const int32_t pos = pos0 + static_cast<int32_t>(p);
                const int32_t first = window > 0 ? std::max(0, pos - window + 1) : 0;
                const int64_t n_keys = pos - first + 1;
                sc.resize(static_cast<size_t>(group * n_keys));
                const float *q0 = q + p * nq + static_cast<int64_t>(kvh) * group * hd;
                attention_scores(kv, layer, kvh, hd, first, n_keys, q0, group, sc.data());
                for (int g = 0; g < group; ++g) {
                    float *s = sc.data() + g * n_keys;
                    float mx = -INFINITY;
                    for (int64_t t = 0; t < n_keys; ++t) {
                        float x = s[t] * c.kq_scale;
                        if (cap > 0.0f) x = std::tanh(x * (1.0f / cap)) * cap;  // ggml's scale, tanh, scale
                        s[t] = x;
                        mx = std::max(mx, x);
                    }
                    // A sink (its logit as stored: no scale, no cap) joins the max and, below, the
                    // denominator, as ggml's soft_max with sinks.
                    const float sink = sinks ? sinks[kvh * group + g] : 0.0f;
                    if (sinks) mx = std::max(mx, sink);
                    // As ggml's softmax over its n_kv (a multiple of 16, the masked rest adding 0):
                    // its vectorised expf, each 16 values summed in f32 by halving, the 16-sums in
                    // double (an F16 cache rounds these probabilities: their bits matter).
                    for (int64_t t = 0; t < n_keys; ++t) s[t] -= mx;
                    exp_ggml_rows(s, s, n_keys);
                    double sum = 0.0;
                    for (int64_t t0 = 0; t0 < n_keys; t0 += 16) {
                        float c[16] = {};
                        for (int64_t t = t0; t < std::min(n_keys, t0 + 16); ++t) c[t - t0] = s[t];
                        for (int h = 8; h >= 1; h /= 2)
                            for (int k = 0; k < h; ++k) c[k] += c[k + h];
                        sum += c[0];
                    }
                    if (sinks) sum += static_cast<double>(exp_f(sink - mx));
                    const float inv = static_cast<float>(1.0 / sum);
                    for (int64_t t = 0; t < n_keys; ++t) s[t] *= inv;
                }
                // The group's heads are adjacent in out: [group][hd] at the first one.
                attention_values(kv, layer, kvh, hd, first, n_keys, sc.data(), group,
                                 out + p * nq + static_cast<int64_t>(kvh) * group * hd);
            }
        };
        const int64_t jobs = n * n_head_kv;
        if (pool)
            pool->parallel_for(jobs, work);
        else
            work(0, jobs);
    }
}

// act(gate) ⊙ up: [P][n_ff] (gate stride gs, up stride us) -> out [P][n_ff].
void glu(FfnKind kind, float *gate, int64_t gs, const float *up, int64_t us, int64_t P, int64_t n, float *out) {
    if (kind == FfnKind::SWIGLU_OAI) {
        // ggml's swiglu_oai (alpha 1.702, limit 7, as llama.cpp fixes them): gate clamped above,
        // up on both sides, one libm expf per value.
        constexpr float kAlpha = 1.702f, kLimit = 7.0f;
        for (int64_t p = 0; p < P; ++p)
            for (int64_t i = 0; i < n; ++i) {
                const float x = std::min(gate[p * gs + i], kLimit);
                const float y = std::clamp(up[p * us + i], -kLimit, kLimit);
                out[p * n + i] = x / (1.0f + exp_f(kAlpha * (-x))) * (y + 1.0f);
            }
        return;
    }
    if (kind == FfnKind::GEGLU) {
        for (int64_t p = 0; p < P; ++p)
            for (int64_t i = 0; i < n; ++i) out[p * n + i] = gelu(gate[p * gs + i]) * up[p * us + i];
        return;
    }
    // SwiGLU as ggml's: whole 16-element chunks take its vectorised expf, the rest libm's expf.
    const int64_t nv = n - n % 16;
    thread_local std::vector<float> e;
    e.resize(static_cast<size_t>(nv));
    for (int64_t p = 0; p < P; ++p) {
        const float *g = gate + p * gs;
        for (int64_t i = 0; i < nv; ++i) e[i] = -g[i];
        exp_ggml_rows(e.data(), e.data(), nv);
        for (int64_t i = 0; i < nv; ++i) out[p * n + i] = g[i] / (1.0f + e[i]) * up[p * us + i];
        for (int64_t i = nv; i < n; ++i) out[p * n + i] = silu(g[i]) * up[p * us + i];
    }
}

// The FFN's inner activation of P rows: s.gate [P][n_ff] = act(gate·x) ⊙ (up·x), or act(up·x)
// without a gate. Gate and up are leased one after the other, so this spans the chunk; up's own
// output is needed only a sub-batch at a time.
void ffn_inner(const ModelConfig &c, const HalfWeights &w, Scratch &s, ThreadPool *pool, const float *x, int64_t P) {
    const int64_t E = c.n_embd, FF = c.n_ff_of(w.layer);
    const FfnKind kind = c.arch->ffn;
    if (kind == FfnKind::SWIGLU_FUSED) {
        // up: [n][2·n_ff], gate is the first half
        const BlockStreamer::Lease up = w.lease(FFN_UP);
        sub_batches(P, [&](int64_t b0, int64_t n) {
            matmul(up.view(FFN_UP), x + b0 * E, n, s.up.data(), pool);
            scale_output(w, FFN_UP, s.up.data(), n, 2 * FF);
            if (w.has(FFN_UP_B)) add_bias(s.up.data(), w.f32(FFN_UP_B), n, 2 * FF);
            glu(FfnKind::SWIGLU, s.up.data(), 2 * FF, s.up.data() + FF, 2 * FF, n, FF, &s.gate[b0 * FF]);
        });
    } else if (kind == FfnKind::GELU) {
        project(w, FFN_UP, FFN_UP_B, x, E, P, s.gate.data(), FF, pool);
        for (int64_t i = 0; i < P * FF; ++i) s.gate[i] = gelu(s.gate[i]);
    } else {
        project(w, FFN_GATE, FFN_GATE_B, x, E, P, s.gate.data(), FF, pool);
        const BlockStreamer::Lease up = w.lease(FFN_UP);
        sub_batches(P, [&](int64_t b0, int64_t n) {
            matmul(up.view(FFN_UP), x + b0 * E, n, s.up.data(), pool);
            scale_output(w, FFN_UP, s.up.data(), n, FF);
            if (w.has(FFN_UP_B)) add_bias(s.up.data(), w.f32(FFN_UP_B), n, FF);
            float *g = &s.gate[b0 * FF];
            glu(kind, g, FF, s.up.data(), FF, n, FF, g);
        });
    }
}

// The chosen experts' weights of one row from its top-k logits (sorted, largest first), as ggml's
// soft_max over those k: libm expf each (k is below a vector's width), the sum in double.
void softmax_topk(const float *logits, int64_t K, float *wk) {
    double sum = 0.0;
    for (int64_t k = 0; k < K; ++k) sum += wk[k] = exp_f(logits[k] - logits[0]);
    const float inv = static_cast<float>(1.0 / sum);
    for (int64_t k = 0; k < K; ++k) wk[k] *= inv;
}

// The experts' own per-layer vectors (null when the file has none).
struct MoeScales {
    const float *router_in = nullptr;  // [n_embd]: the router reads rms_norm(xr)/√n_embd ⊙ this (gemma4)
    float *router_x = nullptr;         // [P][n_embd] room for that input (Scratch::router_x)
    const float *down = nullptr;       // [n_expert]: multiplies each expert's down projection
};

// Mixture of experts: the router's top-k and their weights (ArchSpec::expert_weights); each expert
// runs once on the rows that chose it, so only the chosen experts' weights are decoded. w: the
// router's lease (a resident unit holds the experts, a streamed piece fetches them); hw: the half's
// vectors, for the router's and experts' biases where the architecture has them. The router reads xr
// (x unless the architecture routes on another row), the experts x.
void ffn_moe(const ModelConfig &c, const HalfWeights &hw, const BlockData &w, ThreadPool *pool, const float *x,
             float *y, int64_t P, const float *xr, const MoeScales &sc) {
    const int64_t E = c.n_embd, FF = c.n_ff_exp, NX = c.n_expert, K = c.n_expert_used;
    auto vec = [&](TensorRole r) { return hw.has(r) ? hw.f32(r) : nullptr; };
    const float *router_b = vec(FFN_GATE_INP_B), *gate_b = vec(FFN_GATE_EXPS_B), *up_b = vec(FFN_UP_EXPS_B),
                *down_b = vec(FFN_DOWN_EXPS_B);
    std::vector<float> router(P * NX);
    if (sc.router_in) {
        // As ggml's ops in turn: rms_norm, scale by 1/√n_embd, multiply by the scale vector.
        float *xs = sc.router_x;
        const float k = 1.0f / std::sqrt(static_cast<float>(E));
        for (int64_t p = 0; p < P; ++p) {
            float *r = xs + p * E;
            rms_norm(xr + p * E, nullptr, r, E, c.norm_eps);
            for (int64_t i = 0; i < E; ++i) r[i] = (r[i] * k) * sc.router_in[i];
        }
        matmul(w.view(FFN_GATE_INP), xs, P, router.data(), pool);
    } else {
        matmul(w.view(FFN_GATE_INP), xr, P, router.data(), pool);
    }
    if (router_b) add_bias(router.data(), router_b, P, NX);
    std::vector<int32_t> sel(P * K);
    std::vector<float> wsel(P * K);
    std::vector<int32_t> idx(NX);
    std::vector<float> top(K);
    // idx[0, K): the K largest of r, largest first, equal values in expert order (a stable sort's
    // first K, without sorting the rest).
    auto top_k = [&](const float *r) {
        for (int64_t e = 0; e < NX; ++e) idx[e] = static_cast<int32_t>(e);
        std::partial_sort(idx.begin(), idx.begin() + K, idx.end(),
                          [&](int32_t a, int32_t b) { return r[a] > r[b] || (r[a] == r[b] && a < b); });
    };
    for (int64_t p = 0; p < P; ++p) {
        float *r = &router[p * NX];
        if (c.arch->expert_weights == ExpertWeights::SOFTMAX_TOPK) {
            // The k largest logits, then a softmax over just them.
            top_k(r);
            for (int64_t k = 0; k < K; ++k) top[k] = r[idx[k]], sel[p * K + k] = idx[k];
            softmax_topk(top.data(), K, &wsel[p * K]);
            continue;
        }
        const float mx = *std::max_element(r, r + NX);
        double sum = 0.0;
        for (int64_t e = 0; e < NX; ++e) sum += r[e] = exp_f(r[e] - mx);
        // As ggml's soft_max scales by the f32 reciprocal of the sum, and sum_rows adds in double.
        const float inv = static_cast<float>(1.0 / sum);
        for (int64_t e = 0; e < NX; ++e) r[e] *= inv;
        top_k(r);
        double wsum_d = 0.0;
        for (int64_t k = 0; k < K; ++k) wsum_d += r[idx[k]];
        const float wsum = std::max(static_cast<float>(wsum_d), 6.103515625e-5f);
        for (int64_t k = 0; k < K; ++k) {
            sel[p * K + k] = idx[k];
            wsel[p * K + k] = r[idx[k]] / wsum;
        }
    }
    if (w.experts && !w.ptr[FFN_UP_EXPS]) {
        // Streamed experts: tell the fetcher the slabs the loop below asks for, in its order.
        std::vector<bool> used(NX, false);
        for (int32_t e : sel) used[e] = true;
        std::vector<std::pair<TensorRole, uint32_t>> order;
        const bool gate = !c.arch->experts_fused_gate_up && w.tensors->t[FFN_GATE_EXPS];
        for (uint32_t e = 0; e < NX; ++e) {
            if (!used[e]) continue;
            order.emplace_back(FFN_UP_EXPS, e);
            if (gate) order.emplace_back(FFN_GATE_EXPS, e);
            order.emplace_back(FFN_DOWN_EXPS, e);
        }
        w.experts->plan(*w.tensors, order);
    }
    std::vector<float> outs(P * K * E), xe, ge, ue, ye;
    // Gated experts take the architecture's gated activation (SwiGLU unless it is GeGLU or SwiGLU-OAI).
    const FfnKind act = c.arch->ffn == FfnKind::GEGLU || c.arch->ffn == FfnKind::SWIGLU_OAI ? c.arch->ffn : FfnKind::SWIGLU;
    for (int32_t e = 0; e < NX; ++e) {
        std::vector<int64_t> rows;  // p * K + k of every choice of expert e
        for (int64_t i = 0; i < P * K; ++i)
            if (sel[i] == e) rows.push_back(i);
        if (rows.empty()) continue;
        const int64_t n = static_cast<int64_t>(rows.size());
        xe.resize(n * E);
        ge.resize(n * FF);
        ue.resize(n * FF);
        ye.resize(n * E);
        for (int64_t r = 0; r < n; ++r) std::copy_n(x + (rows[r] / K) * E, E, &xe[r * E]);
        if (c.arch->experts_fused_gate_up && !w.tensors->t[FFN_GATE_EXPS]) {  // else a file with them apart
            // ue: [n][gate | up], each FF long
            ue.resize(n * 2 * FF);
            matmul(w.expert(FFN_UP_EXPS, e), xe.data(), n, ue.data(), pool);
            glu(act, ue.data(), 2 * FF, ue.data() + FF, 2 * FF, n, FF, ge.data());
        } else {
            matmul(w.expert(FFN_UP_EXPS, e), xe.data(), n, ue.data(), pool);
            if (up_b) add_bias(ue.data(), up_b + e * FF, n, FF);
            if (w.tensors->t[FFN_GATE_EXPS]) {
                matmul(w.expert(FFN_GATE_EXPS, e), xe.data(), n, ge.data(), pool);
                if (gate_b) add_bias(ge.data(), gate_b + e * FF, n, FF);
                glu(act, ge.data(), FF, ue.data(), FF, n, FF, ge.data());
            } else {
                for (int64_t i = 0; i < n * FF; ++i) ge[i] = silu(ue[i]);
            }
        }
        matmul(w.expert(FFN_DOWN_EXPS, e), ge.data(), n, ye.data(), pool);
        if (down_b) add_bias(ye.data(), down_b + e * E, n, E);
        // llama.cpp: the expert's scale, then its routing weight.
        if (sc.down)
            for (int64_t i = 0; i < n * E; ++i) ye[i] *= sc.down[e];
        for (int64_t r = 0; r < n; ++r)
            for (int64_t i = 0; i < E; ++i) outs[rows[r] * E + i] = ye[r * E + i] * wsel[rows[r]];
    }
    for (int64_t p = 0; p < P; ++p) {
        float *yp = y + p * E;
        std::copy_n(&outs[(p * K) * E], E, yp);
        for (int64_t k = 1; k < K; ++k)
            for (int64_t i = 0; i < E; ++i) yp[i] += outs[(p * K + k) * E + i];
    }
}

// The shared expert of P rows (qwen35moe, qwen3next): s.sh_out [P][n_embd] =
// sigmoid(gate_inp_shexp · x) · down(silu(gate·x) ⊙ up·x), the gate one F32 row.
void shared_expert(const ModelConfig &c, const HalfWeights &w, Scratch &s, ThreadPool *pool, const float *x,
                   int64_t P) {
    const int64_t E = c.n_embd, FF = c.n_ff_shexp;
    {
        const BlockStreamer::Lease gate = w.lease(FFN_GATE_SHEXP);
        sub_batches(P, [&](int64_t b0, int64_t n) {
            matmul(gate.view(FFN_GATE_SHEXP), x + b0 * E, n, &s.sh_gate[b0 * FF], pool);
        });
    }
    {
        const BlockStreamer::Lease up = w.lease(FFN_UP_SHEXP);
        sub_batches(P, [&](int64_t b0, int64_t n) {
            matmul(up.view(FFN_UP_SHEXP), x + b0 * E, n, s.sh_up.data(), pool);
            float *g = &s.sh_gate[b0 * FF];
            glu(FfnKind::SWIGLU, g, FF, s.sh_up.data(), FF, n, FF, g);
        });
    }
    const BlockStreamer::Lease down = w.lease(FFN_DOWN_SHEXP);
    const WeightView gate_row{TensorType::F32, reinterpret_cast<const uint8_t *>(w.f32(FFN_GATE_INP_SHEXP)), E, 1,
                              static_cast<uint64_t>(E) * sizeof(float)};
    sub_batches(P, [&](int64_t b0, int64_t n) {
        float *out = &s.sh_out[b0 * E];
        matmul(down.view(FFN_DOWN_SHEXP), &s.sh_gate[b0 * FF], n, out, pool);
        float g[kSubBatch];
        matmul(gate_row, x + b0 * E, n, g, pool);
        for (int64_t p = 0; p < n; ++p) {
            const float k = sigmoid(g[p]);
            for (int64_t i = 0; i < E; ++i) out[p * E + i] *= k;
        }
    });
}

// The attention half of a block over the P positions of a chunk, in place on h: [P][n_embd]. One
// recipe for every architecture: choices come from the spec, optional tensors are used when present.
// With a parallel residual (attention and FFN both read one norm of h) the normed input and the
// attention output are kept in par_x / par_o for the FFN half, and h is left for it to update.
void attention_half(const Model &m, const HalfWeights &w, uint32_t layer, const std::vector<RowRun> &runs, Scratch &s,
                    ThreadPool *pool, float *h, int64_t P, float *par_x, float *par_o) {
    const ModelConfig &c = m.config();
    const int64_t E = c.n_embd, NQ = c.n_q(layer), NKV = c.n_kv(layer), HD = c.hd(layer);
    const int64_t n_head_kv = c.n_head_kv_of(layer);
    auto vec = [&](TensorRole sl) { return w.has(sl) ? w.f32(sl) : nullptr; };

    // x = norm(h)
    norm_rows(c, h, w.f32(ATTN_NORM), vec(ATTN_NORM_B), s.x.data(), P, E);

    // q: [P][NQ], k, v: [P][NKV], each weight leased for the chunk in turn
    if (w.has(ATTN_QKV)) {
        const int64_t NT = NQ + 2 * NKV;
        s.qkv.resize(std::min(P, kSubBatch) * NT);
        const BlockStreamer::Lease qkv = w.lease(ATTN_QKV);
        sub_batches(P, [&](int64_t b0, int64_t n) {
            matmul(qkv.view(ATTN_QKV), &s.x[b0 * E], n, s.qkv.data(), pool);
            if (w.has(ATTN_QKV_B)) add_bias(s.qkv.data(), w.f32(ATTN_QKV_B), n, NT);
            for (int64_t p = 0; p < n; ++p) {
                const float *t = &s.qkv[p * NT];
                std::copy_n(t, NQ, &s.q[(b0 + p) * NQ]);
                std::copy_n(t + NQ, NKV, &s.k[(b0 + p) * NKV]);
                std::copy_n(t + NQ + NKV, NKV, &s.v[(b0 + p) * NKV]);
            }
        });
    } else if (c.arch->attn_output_gate) {
        // qg: [P][n_head][q | gate], each hd long
        project(w, ATTN_Q, ATTN_Q_B, s.x.data(), E, P, s.qg.data(), 2 * NQ, pool);
        for (int64_t p = 0; p < P; ++p) {
            for (int64_t hh = 0; hh < c.n_head; ++hh) {
                const float *src = &s.qg[p * 2 * NQ + hh * 2 * HD];
                std::copy_n(src, HD, &s.q[p * NQ + hh * HD]);
                std::copy_n(src + HD, HD, &s.att_gate[p * NQ + hh * HD]);
            }
        }
        project(w, ATTN_K, ATTN_K_B, s.x.data(), E, P, s.k.data(), NKV, pool);
        project(w, ATTN_V, ATTN_V_B, s.x.data(), E, P, s.v.data(), NKV, pool);
    } else if (!c.has_kv(layer)) {
        project(w, ATTN_Q, ATTN_Q_B, s.x.data(), E, P, s.q.data(), NQ, pool);
    } else {
        project(w, ATTN_Q, ATTN_Q_B, s.x.data(), E, P, s.q.data(), NQ, pool);
        project(w, ATTN_K, ATTN_K_B, s.x.data(), E, P, s.k.data(), NKV, pool);
        if (w.has(ATTN_V) || !c.arch->v_from_k)
            project(w, ATTN_V, ATTN_V_B, s.x.data(), E, P, s.v.data(), NKV, pool);
        else
            std::copy_n(s.k.data(), P * NKV, s.v.data());  // V is K's projection, before its norm and RoPE
    }
    const RopeParams rp = c.layer_rope(layer);
    const bool rotate = c.uses_rope(layer);
    const int n_rot = static_cast<int>(c.n_rot_of(layer));
    const bool layer_ff = !(c.arch->rope_freqs_full_only && c.is_swa(layer));
    const bool own_kv = c.has_kv(layer);
    for (const RowRun &r : runs) {
        KvCache &kv = *r.kv;
        const float *rope_ff = layer_ff ? m.rope_factors(kv.rope_ctx()) : nullptr;
        for (int64_t p = r.row; p < r.row + r.n; ++p) {
            const int32_t pos = r.pos0 + static_cast<int32_t>(p - r.row);
            float *qp = &s.q[p * NQ], *kp = &s.k[p * NKV];
            if (w.has(ATTN_Q_NORM)) head_norm(qp, c.n_head, HD, w.f32(ATTN_Q_NORM), c.norm_eps);
            if (own_kv) {
                if (w.has(ATTN_K_NORM)) head_norm(kp, n_head_kv, HD, w.f32(ATTN_K_NORM), c.norm_eps);
                if (c.arch->v_norm) head_norm(&s.v[p * NKV], n_head_kv, HD, nullptr, c.norm_eps);
            }
            if (rotate) {
                rope(qp, c.n_head, HD, n_rot, pos, rp, rope_ff, c.arch->rope);
                if (own_kv) rope(kp, n_head_kv, HD, n_rot, pos, rp, rope_ff, c.arch->rope);
            }
            if (c.q_scale != 1.0f)
                for (int64_t i = 0; i < NQ; ++i) qp[i] *= c.q_scale;
            if (c.attn_temp_scale != 0.0f) {
                const float t = c.attn_temp(pos);
                for (int64_t i = 0; i < NQ; ++i) qp[i] *= t;
            }
        }
        if (own_kv) {
            attention(c, kv, layer, &s.q[r.row * NQ], &s.k[r.row * NKV], &s.v[r.row * NKV], vec(ATTN_SINKS),
                      &s.att[r.row * NQ], r.n, r.pos0, pool);
        } else {
            attention(c, kv, c.kv_layer(layer), &s.q[r.row * NQ], nullptr, nullptr, vec(ATTN_SINKS),
                      &s.att[r.row * NQ], r.n, r.pos0, pool);
        }
    }

    // Gated attention: att *= sigmoid(gate), elementwise.
    if (c.arch->attn_output_gate)
        for (int64_t i = 0; i < P * NQ; ++i) s.att[i] *= sigmoid(s.att_gate[i]);

    // a = Wo·att (+b), optionally post-normed, a sub-batch at a time: [n][E]
    const BlockStreamer::Lease wo = w.lease(ATTN_OUT);
    sub_batches(P, [&](int64_t b0, int64_t n) {
        float *o = s.o.data();
        matmul(wo.view(ATTN_OUT), &s.att[b0 * NQ], n, o, pool);
        scale_output(w, ATTN_OUT, o, n, E);
        if (w.has(ATTN_OUT_B)) add_bias(o, w.f32(ATTN_OUT_B), n, E);
        if (w.has(ATTN_POST_NORM)) norm_rows(c, o, w.f32(ATTN_POST_NORM), nullptr, o, n, E);
        if (c.arch->parallel_residual) {
            std::copy_n(o, n * E, par_o + b0 * E);
        } else {
            for (int64_t i = 0; i < n * E; ++i) h[b0 * E + i] += o[i];
        }
    });
    if (c.arch->parallel_residual) std::copy_n(s.x.data(), P * E, par_x);
}

// The FFN half: h += FFN(norm(h)), or with a parallel residual h += a + FFN(x) from the attention half.
// The layer's share of the per-layer token embeddings, after the FFN's residual (gemma4's E2B/E4B):
// h += post_norm(proj · (gelu(inp_gate · h) ⊙ ple[layer])). ple: [P][n_layer][n_embd_per_layer].
void per_layer_input(const ModelConfig &c, const HalfWeights &w, Scratch &s, ThreadPool *pool, float *h, int64_t P,
                     const float *ple) {
    const int64_t E = c.n_embd, NP = c.n_embd_per_layer, NL = static_cast<int64_t>(c.n_layer) * NP;
    project(w, PLE_INP_GATE, h, E, P, s.ple_g.data(), NP, pool);
    for (int64_t p = 0; p < P; ++p) {
        float *g = &s.ple_g[p * NP];
        const float *in = ple + p * NL + static_cast<int64_t>(w.layer) * NP;
        for (int64_t i = 0; i < NP; ++i) g[i] = gelu(g[i]) * in[i];
    }
    const BlockStreamer::Lease proj = w.lease(PLE_PROJ);
    sub_batches(P, [&](int64_t b0, int64_t n) {
        float *y = s.f.data();
        matmul(proj.view(PLE_PROJ), &s.ple_g[b0 * NP], n, y, pool);
        norm_rows(c, y, w.f32(PLE_POST_NORM), nullptr, y, n, E);
        for (int64_t i = 0; i < n * E; ++i) h[b0 * E + i] += y[i];
    });
}

void ffn_half(const Model &m, const HalfWeights &w, Scratch &s, ThreadPool *pool, float *h, int64_t P, const float *ple,
              const float *par_x, const float *par_o) {
    const ModelConfig &c = m.config();
    const int64_t E = c.n_embd;
    const float *x = par_x;
    if (!c.arch->parallel_residual) {
        norm_rows(c, h, w.f32(FFN_NORM), w.has(FFN_NORM_B) ? w.f32(FFN_NORM_B) : nullptr, s.x.data(), P, E);
        x = s.x.data();
    }
    // f (n rows from b0: s.f) -> optional post-norm -> residual
    auto finish = [&](int64_t b0, int64_t n) {
        float *f = s.f.data();
        if (w.has(FFN_POST_NORM)) norm_rows(c, f, w.f32(FFN_POST_NORM), nullptr, f, n, E);
        float *hb = h + b0 * E;
        if (c.arch->parallel_residual) {
            for (int64_t i = 0; i < n * E; ++i) hb[i] += par_o[b0 * E + i] + f[i];
        } else {
            for (int64_t i = 0; i < n * E; ++i) hb[i] += f[i];
        }
    };
    // The dense FFN of x into s.f a sub-batch at a time, each handed to done(b0, n).
    auto dense = [&](auto &&done) {
        ffn_inner(c, w, s, pool, x, P);
        const BlockStreamer::Lease down = w.lease(FFN_DOWN);
        sub_batches(P, [&](int64_t b0, int64_t n) {
            matmul(down.view(FFN_DOWN), &s.gate[b0 * c.n_ff_of(w.layer)], n, s.f.data(), pool);
            scale_output(w, FFN_DOWN, s.f.data(), n, E);
            if (w.has(FFN_DOWN_B)) add_bias(s.f.data(), w.f32(FFN_DOWN_B), n, E);
            done(b0, n);
        });
    };
    if (c.n_expert > 0) {
        // The shared expert or dense branch first (their matrices leased one at a time, each over
        // the chunk; the result in sh_out), then the routed experts a sub-batch at a time, their sum
        // added as llama.cpp adds it.
        if (c.arch->shared_expert) shared_expert(c, w, s, pool, x, P);
        const bool branch = c.arch->moe_dense_branch;
        const float *xe = x, *xr = x;
        if (branch) {
            dense([&](int64_t b0, int64_t n) {
                norm_rows(c, s.f.data(), w.f32(FFN_POST_NORM_1), nullptr, &s.sh_out[b0 * E], n, E);
            });
            norm_rows(c, h, w.f32(FFN_PRE_NORM_2), nullptr, s.moe_x.data(), P, E);
            xe = s.moe_x.data();
            xr = h;
        }
        MoeScales sc;
        if (w.has(FFN_GATE_INP_SCALE)) {
            sc.router_in = w.f32(FFN_GATE_INP_SCALE);
            sc.router_x = s.router_x.data();
        }
        if (w.has(FFN_DOWN_EXPS_SCALE)) sc.down = w.f32(FFN_DOWN_EXPS_SCALE);
        const BlockStreamer::Lease router = w.lease(FFN_GATE_INP);
        sub_batches(P, [&](int64_t b0, int64_t n) {
            ffn_moe(c, w, router.data(), pool, xe + b0 * E, s.f.data(), n, xr + b0 * E, sc);
            if (branch) {
                float *f = s.f.data();
                norm_rows(c, f, w.f32(FFN_POST_NORM_2), nullptr, f, n, E);
                for (int64_t i = 0; i < n * E; ++i) f[i] = s.sh_out[b0 * E + i] + f[i];
            }
            if (c.arch->shared_expert)
                for (int64_t i = 0; i < n * E; ++i) s.f[i] += s.sh_out[b0 * E + i];
            finish(b0, n);
        });
    } else {
        dense(finish);
    }
    if (c.n_embd_per_layer > 0) per_layer_input(c, w, s, pool, h, P, ple);
    if (w.has(LAYER_OUT_SCALE)) {
        const float k = *w.f32(LAYER_OUT_SCALE);
        for (int64_t i = 0; i < P * E; ++i) h[i] *= k;
    }
}

// The per-layer inputs of the P rows whose (scaled) embeddings are in s.h, as llama.cpp's gemma4 computes
// them: ((rms_norm(W_proj · h / √n_embd) ⊙ proj_norm) + token row · √n_pl) / √2, per layer's n_pl values.
// s.ple: [P][n_layer][n_pl].
void per_layer_inputs(const Model &m, const ForwardSegment *segs, size_t n_seg, int64_t P, Scratch &s, ThreadPool *pool,
                      IoStats *stats) {
    const ModelConfig &c = m.config();
    const int64_t E = c.n_embd, NP = c.n_embd_per_layer, NL = static_cast<int64_t>(c.n_layer) * NP;
    sub_batches(P, [&](int64_t b0, int64_t n) { matmul(m.per_layer_proj(), &s.h[b0 * E], n, &s.ple[b0 * NL], pool); });
    const float k_proj = 1.0f / std::sqrt(static_cast<float>(E)), k_tok = std::sqrt(static_cast<float>(NP)),
                k_sum = 1.0f / std::sqrt(2.0f);
    std::vector<float> tok(NL);
    int64_t row = 0;
    for (size_t i = 0; i < n_seg; ++i) {
        for (int64_t p = 0; p < segs[i].n_tokens; ++p, ++row) {
            m.per_layer_embed(segs[i].tokens[p], tok.data(), stats);
            float *r = &s.ple[row * NL];
            for (int64_t j = 0; j < NL; ++j) r[j] *= k_proj;
            for (int64_t l = 0; l < static_cast<int64_t>(c.n_layer); ++l)
                rms_norm(r + l * NP, m.per_layer_proj_norm(), r + l * NP, NP, c.norm_eps);
            for (int64_t j = 0; j < NL; ++j) r[j] = (r[j] + tok[j] * k_tok) * k_sum;
        }
    }
}

}  // namespace

void forward(const Model &m, KvCache &kv, Scratch &s, ThreadPool *pool, const ForwardRequest &req) {
    ForwardSegment seg;
    seg.kv = &kv;
    seg.tokens = req.tokens;
    seg.n_tokens = req.n_tokens;
    seg.pos0 = req.pos0;
    seg.all_logits = req.all_logits;
    seg.logits = req.logits;
    seg.cancel = req.cancel;
    forward_batch(m, &seg, 1, s, pool, req.blocks, req.stats);
}

void forward_batch(const Model &m, const ForwardSegment *segs, size_t n_seg, Scratch &s, ThreadPool *pool,
                   BlockStreamer *blocks, IoStats *stats) {
    const ModelConfig &c = m.config();
    // The RAM-budget dial may not change the resident set while a forward pass runs.
    std::shared_lock<std::shared_mutex> lock(m.layers().mutex());
    const int64_t E = c.n_embd;
    const LayerStore &ls = m.layers();
    // Segment i's rows start at row0[i] of the stacked P; head rows: those whose logits are wanted.
    std::vector<int64_t> row0(n_seg + 1, 0);
    int64_t head_rows = 0;
    for (size_t i = 0; i < n_seg; ++i) {
        row0[i + 1] = row0[i] + segs[i].n_tokens;
        if (segs[i].logits) head_rows += segs[i].all_logits ? segs[i].n_tokens : 1;
    }
    const int64_t P = row0[n_seg];
    s.ensure(c, P, m.streams() ? P : std::min(P, kSubBatch), std::max<int64_t>(head_rows, 1));
    for (size_t i = 0; i < n_seg; ++i) {
        for (int64_t p = 0; p < segs[i].n_tokens; ++p) {
            float *hp = &s.h[(row0[i] + p) * E];
            m.embed(segs[i].tokens[p], hp, stats);
            if (c.embed_scale != 1.0f)
                for (int64_t e = 0; e < E; ++e) hp[e] *= c.embed_scale;
            if (m.has_position_embd()) m.add_position(segs[i].pos0 + static_cast<int32_t>(p), hp, stats);
        }
    }
    if (c.n_embd_per_layer > 0) per_layer_inputs(m, segs, n_seg, P, s, pool, stats);
    auto check_cancel = [&] {
        for (size_t i = 0; i < n_seg; ++i)
            if (segs[i].cancel && segs[i].cancel->load(std::memory_order_relaxed)) fail(LLM_ERR_CANCELLED, "cancelled");
    };
    // The segments' rows within [b0, b0 + n), as runs relative to b0.
    std::vector<RowRun> runs;
    auto runs_of = [&](int64_t b0, int64_t n) -> const std::vector<RowRun> & {
        runs.clear();
        for (size_t i = 0; i < n_seg; ++i) {
            const int64_t lo = std::max(row0[i], b0), hi = std::min(row0[i + 1], b0 + n);
            if (lo < hi)
                runs.push_back({segs[i].kv, lo - b0, hi - lo, segs[i].pos0 + static_cast<int32_t>(lo - row0[i])});
        }
        return runs;
    };

    const bool par = c.arch->parallel_residual;
    for (uint32_t l = 0; l < c.n_layer; ++l) {
        check_cancel();
        // A streamed half runs over the whole chunk in one pass, each matrix leased (read) once for
        // it; a resident one a sub-batch at a time, which keeps the activations small. Either way the
        // matmuls run kSubBatch positions at a time and every position's arithmetic is unchanged
        // (earlier positions' keys are in the cache before later ones attend). With several segments
        // the chunk is all their rows: one read of a streamed matrix serves every segment.
        for (uint32_t part = 0; part < kUnitsPerBlock; ++part) {
            const uint32_t u = unit_index(l, part);
            const HalfWeights w{*blocks, ls.tensors(u), l, u};
            const int64_t pass = ls.resident(u) ? kSubBatch : P;
            for (int64_t b0 = 0; b0 < P; b0 += pass) {
                const int64_t n = std::min(pass, P - b0);
                float *h = &s.h[b0 * E];
                float *px = par ? &s.par_x[b0 * E] : nullptr, *po = par ? &s.par_o[b0 * E] : nullptr;
                if (part == 0) {
                    switch (c.kind(l)) {
                    case MixerKind::ATTENTION: attention_half(m, w, l, runs_of(b0, n), s, pool, h, n, px, po); break;
                    case MixerKind::GATED_DELTA_NET:
                        gated_delta_net_half(m, w, l, runs_of(b0, n), s, pool, h, n);
                        break;
                    }
                } else {
                    const float *ple = c.n_embd_per_layer ? &s.ple[b0 * c.n_layer * c.n_embd_per_layer] : nullptr;
                    ffn_half(m, w, s, pool, h, n, ple, px, po);
                }
            }
        }
    }
    check_cancel();

    for (size_t i = 0; i < n_seg; ++i) {
        if (segs[i].hidden)
            norm_rows(c, &s.h[row0[i] * E], m.output_norm(), m.output_norm_bias(), segs[i].hidden, segs[i].n_tokens, E);
    }
    if (head_rows == 0) return;
    // Only the rows whose logits are wanted go through the head, all segments' in one pass over it
    // (one read of a streamed head). One segment writes its logits in place; several are handed out.
    int64_t r = 0;
    for (size_t i = 0; i < n_seg; ++i) {
        if (!segs[i].logits) continue;
        const int64_t first = segs[i].all_logits ? 0 : segs[i].n_tokens - 1;
        const int64_t rows = segs[i].n_tokens - first;
        norm_rows(c, &s.h[(row0[i] + first) * E], m.output_norm(), m.output_norm_bias(), &s.logits_in[r * E], rows, E);
        r += rows;
    }
    const int64_t V = c.n_vocab;
    // The head writes [head_rows][V] in one piece: in place when the segments' logits lie that way
    // (one segment, or a caller's one buffer), else through batch_logits.
    float *out = nullptr;
    bool in_place = true;
    r = 0;
    for (size_t i = 0; i < n_seg; ++i) {
        if (!segs[i].logits) continue;
        if (!out) out = segs[i].logits;
        in_place = in_place && segs[i].logits == out + r * V;
        r += segs[i].all_logits ? segs[i].n_tokens : 1;
    }
    if (!in_place) {
        if (s.batch_logits.size() < static_cast<size_t>(head_rows * V)) s.batch_logits.resize(head_rows * V);
        out = s.batch_logits.data();
    }
    m.lm_head(s.logits_in.data(), head_rows, out, pool, s.head_chunk, s.head_out, stats);
    if (m.output_bias()) add_bias(out, m.output_bias(), head_rows, V);
    if (c.final_softcap > 0.0f) {
        const float cap = c.final_softcap;
        // As ggml's scale, tanh, scale: times the f32 reciprocal, not a division.
        for (int64_t i = 0; i < head_rows * V; ++i) out[i] = std::tanh(out[i] * (1.0f / cap)) * cap;
    }
    if (in_place) return;
    r = 0;
    for (size_t i = 0; i < n_seg; ++i) {
        if (!segs[i].logits) continue;
        const int64_t rows = segs[i].all_logits ? segs[i].n_tokens : 1;
        std::copy_n(&out[r * V], rows * V, segs[i].logits);
        r += rows;
    }
}

}  // namespace llm
