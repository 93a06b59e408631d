#include "kernels/repack.h"

#include <cstring>
#include <vector>

#include "kernels/kernel_table.h"
#include "kernels/lowbit.h"

namespace llm {

bool packable(TensorType t, int64_t n_in, int64_t n_out) {
    const auto id = static_cast<uint32_t>(t);
    if (id >= kTensorTypeCount || !kernels_active().packed_gemm[id].fn) return false;
    // (The SIMD packs address a group's rows with i32 offsets.)
    return n_out > 0 && n_out % kPackRows == 0 && n_in > 0 && n_in % type_info(t).block == 0 &&
           row_bytes(t, static_cast<uint64_t>(n_in)) * kPackRows < (1ull << 31);
}

void pack_group(TensorType t, const uint8_t *src, uint64_t row_bytes, int64_t n_in, uint8_t *dst) {
    if (t == TensorType::Q4_K) {
        constexpr uint64_t kCol = kPackRows * sizeof(BlockQ4_K);
        for (int r = 0; r < kPackRows; ++r) {
            const auto *row = reinterpret_cast<const BlockQ4_K *>(src + r * row_bytes);
            for (int64_t b = 0; b < n_in / QK_K; ++b) {
                uint8_t *out = dst + static_cast<uint64_t>(b) * kCol;
                std::memcpy(out + 2 * r, &row[b].d, 2);
                std::memcpy(out + 32 + 2 * r, &row[b].dmin, 2);
                for (int i = 0; i < 12; ++i) out[64 + 16 * i + r] = row[b].scales[i];
                for (int m = 0; m < 32; ++m) std::memcpy(out + 256 + 64 * m + 4 * r, row[b].qs + 4 * m, 4);
            }
        }
        return;
    }
    if (t == TensorType::MXFP4) {
        constexpr uint64_t kCol = kPackRows * sizeof(BlockMXFP4);
        for (int r = 0; r < kPackRows; ++r) {
            const auto *row = reinterpret_cast<const BlockMXFP4 *>(src + r * row_bytes);
            for (int64_t b = 0; b < n_in / QK_MXFP4; ++b) {
                uint8_t *out = dst + static_cast<uint64_t>(b) * kCol;
                out[r] = row[b].e;
                for (int c = 0; c < 4; ++c) std::memcpy(out + kPackRows + 64 * c + 4 * r, row[b].qs + 4 * c, 4);
            }
        }
        return;
    }
    if (t == TensorType::NVFP4) {
        constexpr uint64_t kCol = kPackRows * sizeof(BlockNVFP4);
        for (int r = 0; r < kPackRows; ++r) {
            const auto *row = reinterpret_cast<const BlockNVFP4 *>(src + r * row_bytes);
            for (int64_t b = 0; b < n_in / QK_NVFP4; ++b) {
                uint8_t *out = dst + static_cast<uint64_t>(b) * kCol;
                for (int k = 0; k < 4; ++k) out[16 * k + r] = row[b].d[k];
                for (int c = 0; c < 8; ++c) std::memcpy(out + 4 * kPackRows + 64 * c + 4 * r, row[b].qs + 4 * c, 4);
            }
        }
        return;
    }
    if (t == TensorType::TQ1_0) {
        constexpr uint64_t kCol = kPackRows * sizeof(BlockTQ1_0);
        for (int r = 0; r < kPackRows; ++r) {
            const auto *row = reinterpret_cast<const BlockTQ1_0 *>(src + r * row_bytes);
            for (int64_t b = 0; b < n_in / QK_K; ++b) {
                uint8_t *out = dst + static_cast<uint64_t>(b) * kCol;
                std::memcpy(out + 2 * r, &row[b].d, 2);
                for (int c = 0; c < 12; ++c) std::memcpy(out + 2 * kPackRows + 64 * c + 4 * r, row[b].qs + 4 * c, 4);
                std::memcpy(out + 2 * kPackRows + 64 * 12 + 4 * r, row[b].qh, 4);
            }
        }
        return;
    }
    if (t != TensorType::Q4_0) return;
    const int64_t nb = n_in / QK;
    constexpr uint64_t kCol = kPackRows * sizeof(BlockQ4_0);
    // Row by row, so the reads are one sequential stream (src is usually cold; dst is small and hot).
    for (int r = 0; r < kPackRows; ++r) {
        const auto *row = reinterpret_cast<const BlockQ4_0 *>(src + r * row_bytes);
        for (int64_t b = 0; b < nb; ++b) {
            uint8_t *out = dst + static_cast<uint64_t>(b) * kCol;
            std::memcpy(out + 2 * r, &row[b].d, 2);
            for (int c = 0; c < 4; ++c) std::memcpy(out + 2 * kPackRows + 64 * c + 4 * r, row[b].qs + 4 * c, 4);
        }
    }
}

bool pack_weights(TensorType t, uint8_t *data, int64_t n_in, int64_t n_out) {
    if (!packable(t, n_in, n_out)) return false;
    const uint64_t rb = row_bytes(t, n_in), group = rb * kPackRows;
    const PackFn fast = kernels_active().pack[static_cast<uint32_t>(t)];
    // One group's rows at a time: a few KB of scratch, not a copy of the matrix.
    thread_local std::vector<uint8_t> rows;
    if (rows.size() < group) rows.resize(group);
    for (int64_t g = 0; g < n_out / kPackRows; ++g) {
        uint8_t *at = data + static_cast<uint64_t>(g) * group;
        // One sequential read of the cold rows, then the pack from hot ones back in place.
        std::memcpy(rows.data(), at, group);
        if (fast)
            fast(rows.data(), rb, n_in, at);
        else
            pack_group(t, rows.data(), rb, n_in, at);
    }
    return true;
}

uint64_t packed_act_row_bytes(TensorType t, int64_t n) {
    const TensorType vdt = vec_dot_type(t);
    if (vdt != TensorType::Q8_0) return act_row_bytes(vdt, n);
    return act_row_bytes(vdt, n) + 4 * static_cast<uint64_t>(n / QK);
}

void quantize_packed_act_row(TensorType t, const float *x, void *row, int64_t n) {
    const TensorType vdt = vec_dot_type(t);
    if (vdt != TensorType::Q8_0) return quantize_act_row(vdt, x, row, n);
    auto *bytes = static_cast<uint8_t *>(row);
    quantize_row_q8_0_sums(x, static_cast<BlockQ8_0 *>(row), bytes + act_row_bytes(vdt, n), n);
}

void packed_act_sums(TensorType t, void *row, int64_t n) {
    if (vec_dot_type(t) != TensorType::Q8_0) return;
    auto *blocks = static_cast<const BlockQ8_0 *>(row);
    const int64_t nb = n / QK;
    auto *sums = reinterpret_cast<uint8_t *>(row) + act_row_bytes(TensorType::Q8_0, n);
    for (int64_t b = 0; b < nb; ++b) {
        int32_t s = 0;
        for (int j = 0; j < QK; ++j) s += blocks[b].qs[j];
        std::memcpy(sums + 4 * b, &s, 4);
    }
}

}  // namespace llm
