// The Gated DeltaNet mixer (MixerKind::GATED_DELTA_NET), step by step as llama.cpp's CPU backend
// computes it (src/models/qwen35.cpp build_layer_attn_linear, ggml-cpu ops.cpp ssm_conv and
// gated_delta_net): each step's arithmetic in ggml's order, so the f32 goldens hold to rounding.
#include <algorithm>
#include <cmath>
#include <vector>

#include "core/error.h"
#include "core/thread_pool.h"
#include "kernels/matmul.h"
#include "model/mixer.h"

namespace llm {
namespace {

// ggml's softplus op.
float softplus(float x) { return x > 20.0f ? x : std::log(1.0f + exp_f(x)); }

// ggml's l2_norm op on one head, in place: x / max(|x|, eps), |x| from f32 squares summed in double.
void l2_normalize_head(float *x, int64_t n, float eps) {
    double sum = 0.0;
    for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i] * x[i]);
    const float scale = 1.0f / std::max(std::sqrt(static_cast<float>(sum)), eps);
    for (int64_t i = 0; i < n; ++i) x[i] *= scale;
}

// The causal depthwise conv1d over n tokens of one run, in place: qkv [n][CC] holds the projected
// inputs and receives the conv's outputs. Each channel's window is its last d_conv - 1 inputs (the
// state, oldest first) and the new one; ggml sums the taps in order from 0, each a fused multiply-add
// as GCC builds its loop. The state keeps the last d_conv - 1 inputs.
void causal_conv(const GdnShape &g, const float *kernel, float *state, float *qkv, int64_t n) {
    const int64_t CC = g.conv_channels(), K = g.d_conv;
    float win[64];  // d_conv <= 64 (read_config)
    for (int64_t ch = 0; ch < CC; ++ch) {
        float *st = state + ch * (K - 1);
        const float *kc = kernel + ch * K;
        std::copy_n(st, K - 1, win);
        for (int64_t t = 0; t < n; ++t) {
            float &x = qkv[t * CC + ch];
            win[K - 1] = x;
            float acc = 0.0f;
            for (int64_t i = 0; i < K; ++i) acc = std::fma(win[i], kc[i], acc);
            x = acc;
            std::copy(win + 1, win + K, win);
        }
        std::copy_n(win, K - 1, st);
    }
}

// The delta rule over n tokens of one sequence, each value head's matrix S walking them in order
// (heads in parallel). qkv: [n][CC] after conv, silu and the l2 norms; beta, gd: [n][NV]; y: [n][VD]
// receives the outputs (nullptr: the state only, for a replay). S is stored by value index: S[i][jj]
// at jj·HD + i, so each dot is contiguous.
//   S *= exp(g);  delta = (v - Sᵀk) · beta;  S += k ⊗ delta;  y = Sᵀq / √HD
// one token and head at a time by the kernel table's delta step (vectorised, ggml's bits).
void delta_rule(const ModelConfig &c, float *ssm, const float *qkv, const float *beta, const float *gd, int64_t n,
                float *y_out, ThreadPool *pool) {
    const GdnShape &g = c.gdn;
    const int64_t CC = g.conv_channels(), KD = g.key_dim(), VD = g.value_dim();
    const int64_t NV = g.n_v_heads, HD = g.head_dim;
    const float scale = 1.0f / std::sqrt(static_cast<float>(HD));
    auto work = [&](int64_t j0, int64_t j1) {
        for (int64_t j = j0; j < j1; ++j) {
            const int64_t kh = g.key_head(static_cast<uint32_t>(j), c.arch->gdn_head_map);
            float *S = ssm + j * HD * HD;  // [HD][HD], row jj = S[·][jj]
            for (int64_t t = 0; t < n; ++t) {
                const float *row = qkv + t * CC;
                const float *q = row + kh * HD, *k = row + KD + kh * HD, *v = row + 2 * KD + j * HD;
                delta_rule_step(S, HD, q, k, v, exp_f(gd[t * NV + j]), beta[t * NV + j], scale,
                                y_out ? y_out + t * VD + j * HD : nullptr);
            }
        }
    };
    if (pool)
        pool->parallel_for(NV, work);
    else
        work(0, NV);
}

}  // namespace

void replay_recurrent(const ModelConfig &c, RecurrentState &st, int32_t n, ThreadPool *pool) {
    const int32_t p0 = st.journal_pos();
    if (!st.journal_covers(n)) fail(LLM_ERR_INTERNAL, "no journal of the recurrent state up to position {}", n);
    const GdnShape &g = c.gdn;
    const int64_t CC = g.conv_channels(), K = g.d_conv, NV = g.n_v_heads;
    const int64_t m = n - p0;
    std::copy_n(st.snapshot(), st.n_floats(), st.data());
    std::vector<float> qkv(static_cast<size_t>(m * CC)), beta(static_cast<size_t>(m * NV)), gd(beta.size());
    for (uint32_t l = 0; l < st.n_layer(); ++l) {
        if (!st.is_recurrent(l)) continue;
        // The conv window: the snapshot's last d_conv - 1 inputs followed by the recorded ones.
        float *conv = st.conv(l);
        for (int64_t t = 0; t < m; ++t) {
            const float *rec = st.record(l, p0 + static_cast<int32_t>(t));
            for (int64_t ch = 0; K > 1 && ch < CC; ++ch) {
                float *w = conv + ch * (K - 1);
                std::copy(w + 1, w + K - 1, w);
                w[K - 2] = rec[ch];
            }
            std::copy_n(rec + CC, CC, &qkv[static_cast<size_t>(t * CC)]);
            std::copy_n(rec + 2 * CC, NV, &beta[static_cast<size_t>(t * NV)]);
            std::copy_n(rec + 2 * CC + NV, NV, &gd[static_cast<size_t>(t * NV)]);
        }
        delta_rule(c, st.ssm(l), qkv.data(), beta.data(), gd.data(), m, nullptr, pool);
    }
    st.set_all_next_pos(n);
}

void gated_delta_net_half(const Model &m, const HalfWeights &w, uint32_t layer, const std::vector<RowRun> &runs,
                          Scratch &s, ThreadPool *pool, float *h, int64_t P) {
    const ModelConfig &c = m.config();
    const GdnShape &g = c.gdn;
    const int64_t E = c.n_embd, CC = g.conv_channels(), KD = g.key_dim(), VD = g.value_dim();
    const int64_t NV = g.n_v_heads, NK = g.n_k_heads, HD = g.head_dim;

    // x = norm(h)
    norm_rows(c, h, w.f32(ATTN_NORM), w.has(ATTN_NORM_B) ? w.f32(ATTN_NORM_B) : nullptr, s.x.data(), P, E);

    // qkv: [P][q | k | v] (CC), z: [P][VD], beta and the decay's exponent g: [P][NV]
    float *qkv = s.gdn_qkv.data(), *z = s.gdn_z.data(), *beta = s.gdn_beta.data(), *gd = s.gdn_g.data();
    project(w, GDN_QKV, s.x.data(), E, P, qkv, CC, pool);
    project(w, GDN_Z, s.x.data(), E, P, z, VD, pool);
    if (c.arch->gdn_fused_ba) {
        // ssm_ba: [P][key head][beta (r) | alpha (r)], r value heads per key head; y is free until
        // the delta rule.
        float *ba = s.gdn_y.data();
        project(w, GDN_BA, s.x.data(), E, P, ba, 2 * NV, pool);
        const int64_t r = NV / NK;
        for (int64_t p = 0; p < P; ++p)
            for (int64_t kh = 0; kh < NK; ++kh)
                for (int64_t i = 0; i < r; ++i) {
                    beta[p * NV + kh * r + i] = ba[p * 2 * NV + kh * 2 * r + i];
                    gd[p * NV + kh * r + i] = ba[p * 2 * NV + kh * 2 * r + r + i];
                }
    } else {
        project(w, GDN_BETA, s.x.data(), E, P, beta, NV, pool);
        project(w, GDN_ALPHA, s.x.data(), E, P, gd, NV, pool);
    }
    const float *dt_bias = w.f32(GDN_DT_B), *a = w.f32(GDN_A);  // a = -exp(A_log), as converted
    for (int64_t p = 0; p < P; ++p)
        for (int64_t j = 0; j < NV; ++j) {
            beta[p * NV + j] = sigmoid(beta[p * NV + j]);
            gd[p * NV + j] = softplus(gd[p * NV + j] + dt_bias[j]) * a[j];
        }

    for (const RowRun &r : runs) {
        RecurrentState &st = r.kv->recurrent();
        if (st.next_pos(layer) != r.pos0) {
            fail(LLM_ERR_INTERNAL, "layer {}'s recurrent state has absorbed {} positions; the tokens start at {}",
                 layer, st.next_pos(layer), r.pos0);
        }
        const int64_t n = r.n;
        float *x = qkv + r.row * CC;  // [n][CC]
        const bool rec = st.recording();
        if (rec) {
            for (int64_t t = 0; t < n; ++t)
                std::copy_n(x + t * CC, CC, st.record(layer, r.pos0 + static_cast<int32_t>(t)));
        } else {
            st.absorbed_unrecorded();
        }
        causal_conv(g, w.f32(GDN_CONV), st.conv(layer), x, n);
        for (int64_t t = 0; t < n; ++t) {
            float *row = x + t * CC;
            silu_row(row, CC);
            for (int64_t kh = 0; kh < NK; ++kh) {
                l2_normalize_head(row + kh * HD, HD, c.norm_eps);       // q
                l2_normalize_head(row + KD + kh * HD, HD, c.norm_eps);  // k
            }
            if (rec) {
                float *out = st.record(layer, r.pos0 + static_cast<int32_t>(t));
                std::copy_n(row, CC, out + CC);
                std::copy_n(beta + (r.row + t) * NV, NV, out + 2 * CC);
                std::copy_n(gd + (r.row + t) * NV, NV, out + 2 * CC + NV);
            }
        }
        delta_rule(c, st.ssm(layer), x, beta + r.row * NV, gd + r.row * NV, n, s.gdn_y.data() + r.row * VD, pool);
        st.set_next_pos(layer, r.pos0 + static_cast<int32_t>(n));
    }

    // Gated RMSNorm per value head: norm(y) · silu(z).
    const float *norm_w = w.f32(GDN_NORM);
    for (int64_t p = 0; p < P; ++p)
        for (int64_t j = 0; j < NV; ++j) {
            float *y = &s.gdn_y[p * VD + j * HD], *zj = &z[p * VD + j * HD];
            rms_norm(y, norm_w, y, HD, c.norm_eps);
            silu_row(zj, HD);
            for (int64_t i = 0; i < HD; ++i) y[i] *= zj[i];
        }

    // h += ssm_out · y, a sub-batch at a time
    const BlockStreamer::Lease out = w.lease(GDN_OUT);
    sub_batches(P, [&](int64_t b0, int64_t n) {
        float *o = s.o.data();
        matmul(out.view(GDN_OUT), &s.gdn_y[b0 * VD], n, o, pool);
        scale_output(w, GDN_OUT, o, n, E);
        for (int64_t i = 0; i < n * E; ++i) h[b0 * E + i] += o[i];
    });
}

}  // namespace llm
