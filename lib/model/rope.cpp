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

// IMROPE (ggml's interleaved M-RoPE): pair i takes the position of section t, h or w when its
// sector (i mod the sections' sum) is one of theirs, by thirds, else of section e. A text token's
// position is (p, p, p, 0), so only the pairs of section e do not turn: angle 0.
bool imrope_turns(const std::array<uint32_t, 4> &sec, int i) {
    const uint32_t total = sec[0] + sec[1] + sec[2] + sec[3];
    const uint32_t sector = static_cast<uint32_t>(i) % total;
    return (sector % 3 == 1 && sector < 3 * sec[1]) || (sector % 3 == 2 && sector < 3 * sec[2]) ||
           (sector % 3 == 0 && sector < 3 * sec[0]);
}

// cs[2i], cs[2i+1] = cos, sin of pair i's angle at pos, times the magnitude factors when `scaled`.
void angles(std::vector<float> &cs, int n_rot, int32_t pos, const RopeParams &p, const float *ff, bool scaled,
            RopeKind kind) {
    // θ_i = pos·base^(-2i/n_rot), built as a running f32 product as ggml does (the goldens see
    // its rounding).
    const float theta_scale = std::pow(p.base, -2.0f / static_cast<float>(n_rot));
    cs.resize(n_rot);
    float theta = static_cast<float>(pos);
    for (int i = 0; i < n_rot / 2; ++i) {
        const float th = kind != RopeKind::IMROPE || imrope_turns(p.sections, i) ? theta : 0.0f;
        const float extrap = ff ? th / ff[i] : th;
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
            const bool halves = kind == RopeKind::NEOX || kind == RopeKind::IMROPE;
            const int a = halves ? i : 2 * i;
            const int b = halves ? i + n_rot / 2 : 2 * i + 1;
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
    angles(cs, n_rot, pos, p, ff, true, kind);
    rotate(x, n_heads, hd, n_rot, cs, kind);
}

void rope_shift(float *x, int64_t n_rows, int64_t row_stride, int n_heads, int hd, int n_rot, int32_t delta,
                const RopeParams &p, const float *ff, RopeKind kind) {
    // Every angle is linear in the position (YaRN's blend mixes two linear terms), so the angle at
    // pos + delta is the angle at pos plus the one at delta: one table serves every row.
    std::vector<float> cs;
    angles(cs, n_rot, delta, p, ff, false, kind);
    for (int64_t r = 0; r < n_rows; ++r) rotate(x + r * row_stride, n_heads, hd, n_rot, cs, kind);
}

}  // namespace llm
