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

namespace {

// The packed layout is a byte permutation of the group's rows: row r's bytes, block by block, each
// piece moved to its place in the block column. kPack moves a file-layout row into the group; !kPack
// moves it back out, so packing and unpacking share one description of the layout.
template <bool kPack>
inline void move(uint8_t *packed, uint8_t *row, size_t n) {
    if constexpr (kPack)
        std::memcpy(packed, row, n);
    else
        std::memcpy(row, packed, n);
}

template <bool kPack>
void map_row(TensorType t, uint8_t *row_bytes_of_r, int r, int64_t n_in, uint8_t *group) {
    if (t == TensorType::Q4_K) {
        constexpr uint64_t kCol = kPackRows * sizeof(BlockQ4_K);
        auto *row = reinterpret_cast<BlockQ4_K *>(row_bytes_of_r);
        for (int64_t b = 0; b < n_in / QK_K; ++b) {
            uint8_t *out = group + static_cast<uint64_t>(b) * kCol;
            move<kPack>(out + 2 * r, reinterpret_cast<uint8_t *>(&row[b].d), 2);
            move<kPack>(out + 32 + 2 * r, reinterpret_cast<uint8_t *>(&row[b].dmin), 2);
            for (int i = 0; i < 12; ++i) move<kPack>(out + 64 + 16 * i + r, row[b].scales + i, 1);
            for (int m = 0; m < 32; ++m) move<kPack>(out + 256 + 64 * m + 4 * r, row[b].qs + 4 * m, 4);
        }
    } else if (t == TensorType::MXFP4) {
        constexpr uint64_t kCol = kPackRows * sizeof(BlockMXFP4);
        auto *row = reinterpret_cast<BlockMXFP4 *>(row_bytes_of_r);
        for (int64_t b = 0; b < n_in / QK_MXFP4; ++b) {
            uint8_t *out = group + static_cast<uint64_t>(b) * kCol;
            move<kPack>(out + r, &row[b].e, 1);
            for (int c = 0; c < 4; ++c) move<kPack>(out + kPackRows + 64 * c + 4 * r, row[b].qs + 4 * c, 4);
        }
    } else if (t == TensorType::NVFP4) {
        constexpr uint64_t kCol = kPackRows * sizeof(BlockNVFP4);
        auto *row = reinterpret_cast<BlockNVFP4 *>(row_bytes_of_r);
        for (int64_t b = 0; b < n_in / QK_NVFP4; ++b) {
            uint8_t *out = group + static_cast<uint64_t>(b) * kCol;
            for (int k = 0; k < 4; ++k) move<kPack>(out + 16 * k + r, row[b].d + k, 1);
            for (int c = 0; c < 8; ++c) move<kPack>(out + 4 * kPackRows + 64 * c + 4 * r, row[b].qs + 4 * c, 4);
        }
    } else if (t == TensorType::TQ1_0) {
        constexpr uint64_t kCol = kPackRows * sizeof(BlockTQ1_0);
        auto *row = reinterpret_cast<BlockTQ1_0 *>(row_bytes_of_r);
        for (int64_t b = 0; b < n_in / QK_K; ++b) {
            uint8_t *out = group + static_cast<uint64_t>(b) * kCol;
            move<kPack>(out + 2 * r, reinterpret_cast<uint8_t *>(&row[b].d), 2);
            for (int c = 0; c < 12; ++c) move<kPack>(out + 2 * kPackRows + 64 * c + 4 * r, row[b].qs + 4 * c, 4);
            move<kPack>(out + 2 * kPackRows + 64 * 12 + 4 * r, row[b].qh, 4);
        }
    } else if (t == TensorType::Q4_0) {
        constexpr uint64_t kCol = kPackRows * sizeof(BlockQ4_0);
        auto *row = reinterpret_cast<BlockQ4_0 *>(row_bytes_of_r);
        for (int64_t b = 0; b < n_in / QK; ++b) {
            uint8_t *out = group + static_cast<uint64_t>(b) * kCol;
            move<kPack>(out + 2 * r, reinterpret_cast<uint8_t *>(&row[b].d), 2);
            for (int c = 0; c < 4; ++c) move<kPack>(out + 2 * kPackRows + 64 * c + 4 * r, row[b].qs + 4 * c, 4);
        }
    }
}

}  // namespace

void pack_group(TensorType t, const uint8_t *src, uint64_t row_bytes, int64_t n_in, uint8_t *dst) {
    // Row by row, so the reads are one sequential stream (src is usually cold; dst is small and hot).
    for (int r = 0; r < kPackRows; ++r)
        map_row<true>(t, const_cast<uint8_t *>(src + r * row_bytes), r, n_in, dst);
}

void unpack_row(TensorType t, const uint8_t *group, int64_t n_in, int r, uint8_t *dst) {
    map_row<false>(t, dst, r, n_in, const_cast<uint8_t *>(group));
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
