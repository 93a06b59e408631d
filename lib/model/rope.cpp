#include "model/rope.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace llm {
namespace {

// YaRN's blend between interpolated and extrapolated angles for pair i: 1 below corr_low (fast
// frequencies keep their angle), 0 above corr_high (slow ones are interpolated).
float yarn_ramp(float low, float high, int i) {
    const float y = (static_cast<float>(i) - low) / std::max(0.001f, high - low);
    return 1.0f - std::min(1.0f, std::max(0.0f, y));
}

// cs[2i], cs[2i+1] = cos, sin of pair i's angle at pos, times the magnitude factors when `scaled`.
void angles(std::vector<float> &cs, int n_rot, int32_t pos, const RopeParams &p, const float *ff, bool scaled) {
    // θ_i = pos·base^(-2i/n_rot), built as a running f32 product as ggml does (the goldens see
    // its rounding).
    const float theta_scale = std::pow(p.base, -2.0f / static_cast<float>(n_rot));
    cs.resize(n_rot);
    float theta = static_cast<float>(pos);
    for (int i = 0; i < n_rot / 2; ++i) {
        const float extrap = ff ? theta / ff[i] : theta;
        const float interp = p.freq_scale * extrap;
        float t = interp, mscale = p.attn_factor;
        if (p.ext_factor != 0.0f) {
            const float mix = yarn_ramp(p.corr_low, p.corr_high, i) * p.ext_factor;
            t = interp * (1.0f - mix) + extrap * mix;
            mscale *= 1.0f + 0.1f * std::log(1.0f / p.freq_scale);
        }
        if (!scaled) mscale = 1.0f;
        cs[2 * i] = std::cos(t) * mscale;
        cs[2 * i + 1] = std::sin(t) * mscale;
        theta *= theta_scale;
    }
}

void rotate(float *x, int n_heads, int hd, int n_rot, const std::vector<float> &cs, RopeKind kind) {
    for (int h = 0; h < n_heads; ++h) {
        float *v = x + static_cast<int64_t>(h) * hd;
        for (int i = 0; i < n_rot / 2; ++i) {
            const int a = kind == RopeKind::NEOX ? i : 2 * i;
            const int b = kind == RopeKind::NEOX ? i + n_rot / 2 : 2 * i + 1;
            const float x0 = v[a], x1 = v[b];
            // As GCC contracts ggml's `x0*cos - x1*sin` and `x0*sin + x1*cos` (-ffp-contract=fast):
            // the first product fused, the second rounded (the goldens see which one).
            const float c = cs[2 * i], s = cs[2 * i + 1];
            v[a] = std::fma(x0, c, -(x1 * s));
            v[b] = std::fma(x0, s, x1 * c);
        }
    }
}

}  // namespace

void rope(float *x, int n_heads, int hd, int n_rot, int32_t pos, const RopeParams &p, const float *ff, RopeKind kind) {
    thread_local std::vector<float> cs;
    angles(cs, n_rot, pos, p, ff, true);
    rotate(x, n_heads, hd, n_rot, cs, kind);
}

void rope_shift(float *x, int64_t n_rows, int64_t row_stride, int n_heads, int hd, int n_rot, int32_t delta,
                const RopeParams &p, const float *ff, RopeKind kind) {
    // Every angle is linear in the position (YaRN's blend mixes two linear terms), so the angle at
    // pos + delta is the angle at pos plus the one at delta: one table serves every row.
    std::vector<float> cs;
    angles(cs, n_rot, delta, p, ff, false);
    for (int64_t r = 0; r < n_rows; ++r) rotate(x + r * row_stride, n_heads, hd, n_rot, cs, kind);
}

}  // namespace llm
