#include "model/forward.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/thread_pool.h"

namespace llm {

KvCache::KvCache(const ModelConfig &c, int32_t n_ctx)
    : n_ctx_(n_ctx), n_kv_(c.n_kv()),
      k_(static_cast<size_t>(c.n_layer) * n_ctx * c.n_kv()),
      v_(static_cast<size_t>(c.n_layer) * n_ctx * c.n_kv()) {}

void Scratch::ensure(const ModelConfig &c, int64_t P) {
    auto fit = [](std::vector<float> &b, size_t n) {
        if (b.size() < n) b.resize(n);
    };
    fit(h, P * c.n_embd);
    fit(x, P * c.n_embd);
    fit(q, P * c.n_q());
    fit(k, P * c.n_kv());
    fit(v, P * c.n_kv());
    fit(att, P * c.n_q());
    fit(o, P * c.n_embd);
    fit(gate, P * c.n_ff);
    fit(up, P * c.n_ff);
    fit(logits_in, P * c.n_embd);
}

namespace {

// RMSNorm as ggml computes it: mean of squares summed in double, then x * (1/sqrt(mean + eps)), then * w.
void rms_norm(const float *x, const float *w, float *y, int64_t n, float eps) {
    double sum = 0.0;
    for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i]) * x[i];
    const float mean = static_cast<float>(sum / n);
    const float scale = 1.0f / std::sqrt(mean + eps);
    for (int64_t i = 0; i < n; ++i) y[i] = (x[i] * scale) * w[i];
}

void add_bias(float *y, const float *b, int64_t P, int64_t n) {
    for (int64_t p = 0; p < P; ++p)
        for (int64_t i = 0; i < n; ++i) y[p * n + i] += b[i];
}

// Rotates `n_heads` heads of size hd at position pos; pairs are adjacent (NORM) or halves (NEOX).
// theta_i is built by repeated multiplication in f32, as ggml does, so angles match to the ulp.
void rope(float *x, int n_heads, int hd, int n_rot, int32_t pos, const ModelConfig &c, const float *ff, RopeKind kind) {
    const float theta_scale = std::pow(c.rope_base, -2.0f / static_cast<float>(n_rot));
    thread_local std::vector<float> cs;
    cs.resize(n_rot);
    float theta = static_cast<float>(pos);
    for (int i = 0; i < n_rot / 2; ++i) {
        float t = c.rope_freq_scale * (ff ? theta / ff[i] : theta);
        cs[2 * i] = std::cos(t);
        cs[2 * i + 1] = std::sin(t);
        theta *= theta_scale;
    }
    for (int h = 0; h < n_heads; ++h) {
        float *v = x + static_cast<int64_t>(h) * hd;
        for (int i = 0; i < n_rot / 2; ++i) {
            const int a = kind == RopeKind::NEOX ? i : 2 * i;
            const int b = kind == RopeKind::NEOX ? i + n_rot / 2 : 2 * i + 1;
            const float x0 = v[a], x1 = v[b];
            v[a] = x0 * cs[2 * i] - x1 * cs[2 * i + 1];
            v[b] = x0 * cs[2 * i + 1] + x1 * cs[2 * i];
        }
    }
}

float silu(float x) { return x / (1.0f + std::exp(-x)); }

// Causal attention of P queries (positions pos0..pos0+P-1) over the cache of one layer.
// q: [P][n_head*hd] -> out: [P][n_head*hd]
void attention(const ModelConfig &c, KvCache &kv, uint32_t layer, const float *q, float *out, int64_t P,
               int32_t pos0, ThreadPool *pool) {
    const int hd = static_cast<int>(c.head_dim);
    const int group = static_cast<int>(c.n_head / c.n_head_kv);
    const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
    auto work = [&](int64_t j0, int64_t j1) {
        std::vector<float> sc(pos0 + P);
        for (int64_t j = j0; j < j1; ++j) {
            const int64_t p = j / c.n_head;
            const int h = static_cast<int>(j % c.n_head);
            const int kvh = h / group;
            const int32_t n_keys = pos0 + static_cast<int32_t>(p) + 1;
            const float *qh = q + p * c.n_q() + static_cast<int64_t>(h) * hd;
            float mx = -INFINITY;
            for (int32_t t = 0; t < n_keys; ++t) {
                sc[t] = dot_f32(qh, kv.k(layer, t) + static_cast<int64_t>(kvh) * hd, hd) * scale;
                mx = std::max(mx, sc[t]);
            }
            double sum = 0.0;
            for (int32_t t = 0; t < n_keys; ++t) {
                sc[t] = std::exp(sc[t] - mx);
                sum += sc[t];
            }
            const float inv = static_cast<float>(1.0 / sum);
            float *oh = out + p * c.n_q() + static_cast<int64_t>(h) * hd;
            for (int d = 0; d < hd; ++d) oh[d] = 0.0f;
            for (int32_t t = 0; t < n_keys; ++t) {
                const float w = sc[t] * inv;
                const float *vt = kv.v(layer, t) + static_cast<int64_t>(kvh) * hd;
                for (int d = 0; d < hd; ++d) oh[d] += w * vt[d];
            }
        }
    };
    const int64_t jobs = P * c.n_head;
    if (pool) pool->parallel_for(jobs, work); else work(0, jobs);
}

// One transformer block over P positions, in place on h: [P][n_embd].
void block(const Model &m, const BlockData &w, uint32_t layer, KvCache &kv, Scratch &s, ThreadPool *pool,
           int64_t P, int32_t pos0) {
    const ModelConfig &c = m.config();
    const int64_t E = c.n_embd, NQ = c.n_q(), NKV = c.n_kv(), FF = c.n_ff;

    // x = norm(h)
    for (int64_t p = 0; p < P; ++p) rms_norm(&s.h[p * E], w.f32(ATTN_NORM), &s.x[p * E], E, c.norm_eps);
    // q: [P][NQ], k, v: [P][NKV]
    matmul(w.view(ATTN_Q), s.x.data(), P, s.q.data(), pool);
    matmul(w.view(ATTN_K), s.x.data(), P, s.k.data(), pool);
    matmul(w.view(ATTN_V), s.x.data(), P, s.v.data(), pool);
    if (w.has(ATTN_Q_B)) add_bias(s.q.data(), w.f32(ATTN_Q_B), P, NQ);
    if (w.has(ATTN_K_B)) add_bias(s.k.data(), w.f32(ATTN_K_B), P, NKV);
    if (w.has(ATTN_V_B)) add_bias(s.v.data(), w.f32(ATTN_V_B), P, NKV);
    for (int64_t p = 0; p < P; ++p) {
        const int32_t pos = pos0 + static_cast<int32_t>(p);
        if (c.arch->rope != RopeKind::NONE) {
            rope(&s.q[p * NQ], c.n_head, c.head_dim, c.n_rot, pos, c, m.rope_freqs(), c.arch->rope);
            rope(&s.k[p * NKV], c.n_head_kv, c.head_dim, c.n_rot, pos, c, m.rope_freqs(), c.arch->rope);
        }
        std::copy_n(&s.k[p * NKV], NKV, kv.k(layer, pos));
        std::copy_n(&s.v[p * NKV], NKV, kv.v(layer, pos));
    }
    attention(c, kv, layer, s.q.data(), s.att.data(), P, pos0, pool);
    // h += Wo·att
    matmul(w.view(ATTN_OUT), s.att.data(), P, s.o.data(), pool);
    if (w.has(ATTN_OUT_B)) add_bias(s.o.data(), w.f32(ATTN_OUT_B), P, E);
    for (int64_t i = 0; i < P * E; ++i) s.h[i] += s.o[i];

    // FFN: h += Wdown·(act(Wgate·x) ⊙ Wup·x)
    for (int64_t p = 0; p < P; ++p) rms_norm(&s.h[p * E], w.f32(FFN_NORM), &s.x[p * E], E, c.norm_eps);
    matmul(w.view(FFN_GATE), s.x.data(), P, s.gate.data(), pool);
    matmul(w.view(FFN_UP), s.x.data(), P, s.up.data(), pool);
    if (w.has(FFN_GATE_B)) add_bias(s.gate.data(), w.f32(FFN_GATE_B), P, FF);
    if (w.has(FFN_UP_B)) add_bias(s.up.data(), w.f32(FFN_UP_B), P, FF);
    for (int64_t i = 0; i < P * FF; ++i) s.gate[i] = silu(s.gate[i]) * s.up[i];
    matmul(w.view(FFN_DOWN), s.gate.data(), P, s.o.data(), pool);
    if (w.has(FFN_DOWN_B)) add_bias(s.o.data(), w.f32(FFN_DOWN_B), P, E);
    for (int64_t i = 0; i < P * E; ++i) s.h[i] += s.o[i];
}

}  // namespace

void forward(const Model &m, KvCache &kv, Scratch &s, ThreadPool *pool, const ForwardRequest &req) {
    const ModelConfig &c = m.config();
    const int64_t P = req.n_tokens, E = c.n_embd;
    s.ensure(c, P);
    for (int64_t p = 0; p < P; ++p) m.embed(req.tokens[p], &s.h[p * E]);

    for (uint32_t l = 0; l < c.n_layer; ++l) {
        if (req.cancel && req.cancel->load(std::memory_order_relaxed)) fail(LLM_ERR_CANCELLED, "cancelled");
        const BlockData &w = m.layers().acquire(l);
        block(m, w, l, kv, s, pool, P, req.pos0);
        m.layers().release(l);
    }
    if (req.cancel && req.cancel->load(std::memory_order_relaxed)) fail(LLM_ERR_CANCELLED, "cancelled");

    if (!req.logits) return;
    // Only the rows whose logits are wanted go through the head.
    const int64_t first = req.all_logits ? 0 : P - 1;
    const int64_t rows = P - first;
    for (int64_t r = 0; r < rows; ++r) rms_norm(&s.h[(first + r) * E], m.output_norm(), &s.logits_in[r * E], E, c.norm_eps);
    matmul(m.output_view(), s.logits_in.data(), rows, req.logits, pool);
}

}  // namespace llm
