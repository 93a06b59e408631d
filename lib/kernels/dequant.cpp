#include "kernels/dequant.h"

#include <cstring>

#include "core/error.h"
#include "kernels/blocks.h"
#include "kernels/fp16.h"
#include "kernels/lowbit.h"
#include "kernels/ref_iq.h"

namespace llm {
namespace {

const int8_t kIQ4NL[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

inline float h2f(uint16_t h) { return fp16_to_f32(h); }

void deq_q4_0(const BlockQ4_0 *b, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; ++i, y += QK) {
        const float d = h2f(b[i].d);
        for (int j = 0; j < QK / 2; ++j) {
            y[j] = static_cast<float>((b[i].qs[j] & 0xF) - 8) * d;
            y[j + 16] = static_cast<float>((b[i].qs[j] >> 4) - 8) * d;
        }
    }
}

void deq_q4_1(const BlockQ4_1 *b, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; ++i, y += QK) {
        const float d = h2f(b[i].d), m = h2f(b[i].m);
        for (int j = 0; j < QK / 2; ++j) {
            y[j] = static_cast<float>(b[i].qs[j] & 0xF) * d + m;
            y[j + 16] = static_cast<float>(b[i].qs[j] >> 4) * d + m;
        }
    }
}

void deq_q5_0(const BlockQ5_0 *b, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; ++i, y += QK) {
        const float d = h2f(b[i].d);
        uint32_t qh;
        std::memcpy(&qh, b[i].qh, 4);
        for (int j = 0; j < QK / 2; ++j) {
            int lo = (b[i].qs[j] & 0xF) | (((qh >> j) & 1) << 4);
            int hi = (b[i].qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4);
            y[j] = static_cast<float>(lo - 16) * d;
            y[j + 16] = static_cast<float>(hi - 16) * d;
        }
    }
}

void deq_q5_1(const BlockQ5_1 *b, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; ++i, y += QK) {
        const float d = h2f(b[i].d), m = h2f(b[i].m);
        uint32_t qh;
        std::memcpy(&qh, b[i].qh, 4);
        for (int j = 0; j < QK / 2; ++j) {
            int lo = (b[i].qs[j] & 0xF) | (((qh >> j) & 1) << 4);
            int hi = (b[i].qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4);
            y[j] = static_cast<float>(lo) * d + m;
            y[j + 16] = static_cast<float>(hi) * d + m;
        }
    }
}

void deq_q8_0(const BlockQ8_0 *b, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; ++i, y += QK) {
        const float d = h2f(b[i].d);
        for (int j = 0; j < QK; ++j) y[j] = static_cast<float>(b[i].qs[j]) * d;
    }
}

void deq_q2_k(const BlockQ2_K *b, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; ++i, y += QK_K) {
        const float d = h2f(b[i].d), dmin = h2f(b[i].dmin);
        for (int h = 0; h < 2; ++h)
            for (int j = 0; j < 4; ++j)
                for (int l = 0; l < 32; ++l) {
                    int s = 8 * h + 2 * j + (l >= 16);
                    int q = (b[i].qs[32 * h + l] >> (2 * j)) & 3;
                    y[128 * h + 32 * j + l] = (d * static_cast<float>(b[i].scales[s] & 0xF)) * static_cast<float>(q) -
                                              dmin * static_cast<float>(b[i].scales[s] >> 4);
                }
    }
}

void deq_q3_k(const BlockQ3_K *b, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; ++i, y += QK_K) {
        const float d = h2f(b[i].d);
        int sc[16];
        scales_q3_k(b[i].scales, sc);
        for (int h = 0; h < 2; ++h)
            for (int j = 0; j < 4; ++j)
                for (int l = 0; l < 32; ++l) {
                    int lo = (b[i].qs[32 * h + l] >> (2 * j)) & 3;
                    bool hbit = b[i].hmask[l] & (1 << (4 * h + j));
                    int q = lo - (hbit ? 0 : 4);
                    int s = 8 * h + 2 * j + (l >= 16);
                    y[128 * h + 32 * j + l] = (d * static_cast<float>(sc[s])) * static_cast<float>(q);
                }
    }
}

void deq_q4_k(const BlockQ4_K *b, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; ++i, y += QK_K) {
        const float d = h2f(b[i].d), dmin = h2f(b[i].dmin);
        uint8_t sc[8], mn[8];
        scales_mins_k4(b[i].scales, sc, mn);
        for (int c = 0; c < 4; ++c) {
            const float d1 = d * sc[2 * c], m1 = dmin * mn[2 * c], d2 = d * sc[2 * c + 1], m2 = dmin * mn[2 * c + 1];
            for (int l = 0; l < 32; ++l) {
                y[64 * c + l] = d1 * static_cast<float>(b[i].qs[32 * c + l] & 0xF) - m1;
                y[64 * c + 32 + l] = d2 * static_cast<float>(b[i].qs[32 * c + l] >> 4) - m2;
            }
        }
    }
}

void deq_q5_k(const BlockQ5_K *b, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; ++i, y += QK_K) {
        const float d = h2f(b[i].d), dmin = h2f(b[i].dmin);
        uint8_t sc[8], mn[8];
        scales_mins_k4(b[i].scales, sc, mn);
        for (int c = 0; c < 4; ++c) {
            const float d1 = d * sc[2 * c], m1 = dmin * mn[2 * c], d2 = d * sc[2 * c + 1], m2 = dmin * mn[2 * c + 1];
            for (int l = 0; l < 32; ++l) {
                int lo = (b[i].qs[32 * c + l] & 0xF) + ((b[i].qh[l] & (1 << (2 * c))) ? 16 : 0);
                int hi = (b[i].qs[32 * c + l] >> 4) + ((b[i].qh[l] & (2 << (2 * c))) ? 16 : 0);
                y[64 * c + l] = d1 * static_cast<float>(lo) - m1;
                y[64 * c + 32 + l] = d2 * static_cast<float>(hi) - m2;
            }
        }
    }
}

void deq_q6_k(const BlockQ6_K *b, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; ++i) {
        const float d = h2f(b[i].d);
        for (int h = 0; h < 2; ++h) {
            const uint8_t *L = b[i].ql + 64 * h;
            const uint8_t *H = b[i].qh + 32 * h;
            const int8_t *S = b[i].scales + 8 * h;
            float *Y = y + QK_K * i + 128 * h;
            for (int l = 0; l < 32; ++l) {
                int k = l / 16;
                int q1 = ((L[l] & 0xF) | (((H[l] >> 0) & 3) << 4)) - 32;
                int q2 = ((L[l + 32] & 0xF) | (((H[l] >> 2) & 3) << 4)) - 32;
                int q3 = ((L[l] >> 4) | (((H[l] >> 4) & 3) << 4)) - 32;
                int q4 = ((L[l + 32] >> 4) | (((H[l] >> 6) & 3) << 4)) - 32;
                Y[l] = d * static_cast<float>(S[k]) * static_cast<float>(q1);
                Y[l + 32] = d * static_cast<float>(S[k + 2]) * static_cast<float>(q2);
                Y[l + 64] = d * static_cast<float>(S[k + 4]) * static_cast<float>(q3);
                Y[l + 96] = d * static_cast<float>(S[k + 6]) * static_cast<float>(q4);
            }
        }
    }
}

void deq_iq4_nl(const BlockIQ4_NL *b, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; ++i, y += QK) {
        const float d = h2f(b[i].d);
        for (int j = 0; j < QK / 2; ++j) {
            y[j] = d * static_cast<float>(kIQ4NL[b[i].qs[j] & 0xF]);
            y[j + 16] = d * static_cast<float>(kIQ4NL[b[i].qs[j] >> 4]);
        }
    }
}

void deq_iq4_xs(const BlockIQ4_XS *b, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; ++i) {
        const float d = h2f(b[i].d);
        for (int sb = 0; sb < 8; ++sb) {
            const float dl = d * static_cast<float>(scale_iq4_xs(b[i], sb));
            float *Y = y + QK_K * i + 32 * sb;
            const uint8_t *q = b[i].qs + 16 * sb;
            for (int j = 0; j < 16; ++j) {
                Y[j] = dl * static_cast<float>(kIQ4NL[q[j] & 0xF]);
                Y[j + 16] = dl * static_cast<float>(kIQ4NL[q[j] >> 4]);
            }
        }
    }
}

}  // namespace

bool type_supported(TensorType t) {
    switch (t) {
    case TensorType::F32:
    case TensorType::F16:
    case TensorType::BF16:
    case TensorType::Q4_0:
    case TensorType::Q4_1:
    case TensorType::Q5_0:
    case TensorType::Q5_1:
    case TensorType::Q8_0:
    case TensorType::Q2_K:
    case TensorType::Q3_K:
    case TensorType::Q4_K:
    case TensorType::Q5_K:
    case TensorType::Q6_K:
    case TensorType::IQ4_NL:
    case TensorType::IQ4_XS: return true;
    case TensorType::TQ1_0:
    case TensorType::TQ2_0:
    case TensorType::MXFP4:
    case TensorType::NVFP4:
    case TensorType::Q1_0:
    case TensorType::Q2_0: return true;
    default: return is_iq_grid_type(t);
    }
}

void dequantize_row(TensorType t, const void *src, float *dst, int64_t n) {
    const int64_t nb = n / type_info(t).block;
    switch (t) {
    case TensorType::F32: std::memcpy(dst, src, n * sizeof(float)); break;
    case TensorType::F16: {
        auto *s = static_cast<const uint16_t *>(src);
        for (int64_t i = 0; i < n; ++i) dst[i] = fp16_to_f32(s[i]);
        break;
    }
    case TensorType::BF16: {
        auto *s = static_cast<const uint16_t *>(src);
        for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(s[i]);
        break;
    }
    case TensorType::Q4_0: deq_q4_0(static_cast<const BlockQ4_0 *>(src), dst, nb); break;
    case TensorType::Q4_1: deq_q4_1(static_cast<const BlockQ4_1 *>(src), dst, nb); break;
    case TensorType::Q5_0: deq_q5_0(static_cast<const BlockQ5_0 *>(src), dst, nb); break;
    case TensorType::Q5_1: deq_q5_1(static_cast<const BlockQ5_1 *>(src), dst, nb); break;
    case TensorType::Q8_0: deq_q8_0(static_cast<const BlockQ8_0 *>(src), dst, nb); break;
    case TensorType::Q2_K: deq_q2_k(static_cast<const BlockQ2_K *>(src), dst, nb); break;
    case TensorType::Q3_K: deq_q3_k(static_cast<const BlockQ3_K *>(src), dst, nb); break;
    case TensorType::Q4_K: deq_q4_k(static_cast<const BlockQ4_K *>(src), dst, nb); break;
    case TensorType::Q5_K: deq_q5_k(static_cast<const BlockQ5_K *>(src), dst, nb); break;
    case TensorType::Q6_K: deq_q6_k(static_cast<const BlockQ6_K *>(src), dst, nb); break;
    case TensorType::IQ4_NL: deq_iq4_nl(static_cast<const BlockIQ4_NL *>(src), dst, nb); break;
    case TensorType::IQ4_XS: deq_iq4_xs(static_cast<const BlockIQ4_XS *>(src), dst, nb); break;
    default:
        if (is_iq_grid_type(t)) return dequantize_iq_grid(t, src, dst, nb);
        if (!dequantize_lowbit(static_cast<int>(t), src, dst, nb))
            fail(LLM_ERR_UNSUPPORTED, "tensor type {} is not supported", type_name(t));
    }
}

}  // namespace llm
