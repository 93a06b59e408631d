#include "kernels/matmul.h"

#include <algorithm>
#include <cmath>

#include "core/thread_pool.h"
#include "kernels/repack.h"
#include "kernels/kernel_table.h"
#include "kernels/fp16.h"
#include "kernels/kernel_isa.h"

namespace llm {

// The scalar definition of the F32 order (kernel_isa.h, kDotAccs).
float dot_f32(const float *a, const float *b, int64_t n) {
    float s[kDotAccs] = {};
    int64_t i = 0;
    for (; i + kDotAccs <= n; i += kDotAccs)
        for (int k = 0; k < kDotAccs; ++k) s[k] = std::fma(a[i + k], b[i + k], s[k]);
    return dot_tail_f32(fold_dot_accs(s), a + i, b + i, n - i);
}

namespace {

// Weight rows per tile: four rows (a few KB for typical widths) stay in L1 while every activation
// row passes over them, and a thread's share of W is a whole number of tiles.
constexpr int64_t kTileRows = 4;

// Bytes of weight rows one register tile may span and still be read in place (GemmKernel::repack): the
// rows stay in L1 (32-48 KB) beside the activation runs the panel streams. tinyllama's F16 tiles:
// 5 rows of 2048 (20 KB) in place, 5 rows of 5632 (55 KB) copied.
constexpr uint64_t kRepackTileBytes = 32 << 10;

// The activation rows after conversion: P rows of `stride` bytes (x itself for F32 weights).
struct Converted {
    const uint8_t *data;
    uint64_t stride;
};

// The tiles that multiply w by P activation rows. A single position (decode) takes the gemv tiles:
// few rows at a time, so each stays a sequential stream the hardware prefetcher keeps ahead of (the
// prefill tiles' four interleaved rows made Q8_0 decode 16 tok/s instead of 29 here). Same bits
// either way. convert() and rows_converted() both ask here, so the activation order convert() writes
// is always the one the chosen tiles read.
const GemmKernel &tiles_for(const WeightView &w, int64_t P, const KernelTable &tab) {
    const uint32_t t = static_cast<uint32_t>(w.type);
    if (w.packed) return P == 1 ? tab.packed_gemv[t] : tab.packed_gemm[t];
    return P == 1 ? tab.gemv[t] : tab.gemm[t];
}

Converted convert(const WeightView &w, const float *x, int64_t P, ThreadPool *pool, const KernelTable &tab) {
    const TensorType vdt = vec_dot_type(w.type);
    const bool sums = w.packed || tab.act_sums[static_cast<uint32_t>(w.type)];
    if (vdt == TensorType::F32 && !sums)
        return {reinterpret_cast<const uint8_t *>(x), static_cast<uint64_t>(w.n_in) * 4};
    const uint64_t stride = sums ? packed_act_row_bytes(w.type, w.n_in) : act_row_bytes(vdt, w.n_in);
    // Owned by the calling thread; workers only read it while this call is in flight.
    thread_local std::vector<uint8_t> buf;  // [P][stride]
    if (buf.size() < stride * static_cast<uint64_t>(P)) buf.resize(stride * static_cast<uint64_t>(P));
    uint8_t *dst = buf.data();
    // Tiles may read their activations in an order of their own (GemmKernel::act); the dot product
    // fallback (no tiles) reads the type's order.
    const GemmKernel &g = tiles_for(w, P, tab);
    const ActFn fast = g.fn && g.act ? g.act : (sums ? tab.act_packed : tab.act)[static_cast<uint32_t>(vdt)];
    auto rows = [&](int64_t p0, int64_t p1) {
        for (int64_t p = p0; p < p1; ++p) {
            if (fast)
                fast(x + p * w.n_in, dst + p * stride, w.n_in);
            else if (sums)
                quantize_packed_act_row(w.type, x + p * w.n_in, dst + p * stride, w.n_in);
            else
                quantize_act_row(vdt, x + p * w.n_in, dst + p * stride, w.n_in);
        }
    };
    if (pool && P > 1)
        pool->parallel_for(P, rows);
    else
        rows(0, P);
    return {dst, stride};
}

// Rows [r0, r1) against all P converted activation rows; y[p * y_stride + (r - r0)].
void rows_converted(const WeightView &w, const KernelTable &tab, int64_t r0, int64_t r1, Converted xq, int64_t P,
                    float *y, int64_t y_stride) {
    const GemmKernel &g = tiles_for(w, P, tab);
    if (!g.fn) {
        const VecDotFn dot = tab.fn[static_cast<uint32_t>(w.type)];
        for (int64_t t0 = r0; t0 < r1; t0 += kTileRows) {
            const int64_t t1 = std::min(t0 + kTileRows, r1);
            for (int64_t p = 0; p < P; ++p) {
                const uint8_t *xp = xq.data + static_cast<uint64_t>(p) * xq.stride;
                float *yp = y + p * y_stride - r0;
                for (int64_t r = t0; r < t1; ++r)
                    yp[r] = dot(w.n_in, w.data + static_cast<uint64_t>(r) * w.row_bytes, xp);
            }
        }
        return;
    }
    // Rows too long for one tile's worth to stay in L1 while the panel passes: each tile's rows are
    // copied into the order fn_repacked reads (GemmKernel::repack).
    const uint64_t tile_bytes = static_cast<uint64_t>(g.rm) * w.row_bytes;  // one tile's rows
    const bool repack = g.repack && tile_bytes > kRepackTileBytes;
    thread_local std::vector<uint8_t> wbuf;  // [rm][row_bytes], this thread's tile rows
    if (repack && wbuf.size() < tile_bytes) wbuf.resize(tile_bytes);
    // Positions in panels of g.panel_bytes that stay in L2 while this thread's rows pass over them; inside
    // a panel, rm × rn register tiles. Repacked rows are copied once for all P positions: one panel,
    // whose activation runs L3 feeds in sequence (panels would copy every tile's rows once per panel).
    const int64_t fit = std::max<int64_t>(g.rn, static_cast<int64_t>(g.panel_bytes / std::max<uint64_t>(xq.stride, 1)));
    const int64_t panel = repack ? P : std::min(P, fit / g.rn * g.rn);
    for (int64_t p0 = 0; p0 < P; p0 += panel) {
        const int64_t p1 = std::min(P, p0 + panel);
        for (int64_t t0 = r0; t0 < r1; t0 += g.rm) {
            const int nr = static_cast<int>(std::min<int64_t>(g.rm, r1 - t0));
            const uint8_t *wr = w.data + static_cast<uint64_t>(t0) * w.row_bytes;
            if (repack) {
                for (int r = 0; r < nr; ++r) g.repack(wr + r * w.row_bytes, wbuf.data() + r * w.row_bytes, w.n_in);
                wr = wbuf.data();
            }
            const GemmFn fn = repack ? g.fn_repacked : g.fn;
            // Prefill: the next tile's rows are asked for, a slice per position tile, so they arrive from
            // RAM while these compute; otherwise its first position tile (or its repack) waits for them.
            // (Decode's single rows are sequential streams the hardware prefetcher keeps ahead of.)
            const int64_t next_rows = std::min<int64_t>(g.rm, r1 - t0 - g.rm);
            const uint64_t next_bytes = P > 1 && next_rows > 0 ? static_cast<uint64_t>(next_rows) * w.row_bytes : 0;
            const uint8_t *next = next_bytes ? w.data + static_cast<uint64_t>(t0 + g.rm) * w.row_bytes : nullptr;
            const int64_t n_pt = (p1 - p0 + g.rn - 1) / g.rn;
            uint64_t asked = 0;
            for (int64_t p = p0, i = 1; p < p1; p += g.rn, ++i) {
                for (const uint64_t upto = next_bytes * i / n_pt; asked < upto; asked += 64)
                    __builtin_prefetch(next + asked, 0, 3);
                const int np = static_cast<int>(std::min<int64_t>(g.rn, p1 - p));
                fn(w.n_in, wr, w.row_bytes, nr, xq.data + static_cast<uint64_t>(p) * xq.stride, xq.stride, np,
                   y + p * y_stride + (t0 - r0), y_stride);
            }
        }
    }
}

}  // namespace

void dot_rows_f32(const float *rows, int64_t row_stride, int64_t n_rows, const float *q, int64_t q_stride, int n_q,
                  int64_t dim, float *out, int64_t out_stride) {
    const WeightView w{TensorType::F32, reinterpret_cast<const uint8_t *>(rows), dim, n_rows,
                       static_cast<uint64_t>(row_stride) * 4};
    const Converted xq{reinterpret_cast<const uint8_t *>(q), static_cast<uint64_t>(q_stride) * 4};
    rows_converted(w, kernels_active(), 0, n_rows, xq, n_q, out, out_stride);
}

void weighted_sum_rows(const float *w, int64_t w_stride, int n_w, const float *rows, int64_t row_stride, int64_t n_rows,
                       int64_t dim, float *out, int64_t out_stride, const float *rows2, int64_t n_first) {
    kernels_active().wsum(w, w_stride, n_w, rows, row_stride, n_rows, dim, out, out_stride, rows2,
                          n_first < 0 ? n_rows : n_first);
}

void weighted_sum_rows_f16(const float *w, int64_t w_stride, int n_w, const uint16_t *rows, int64_t row_stride,
                           int64_t n_rows, int64_t dim, float *out, int64_t out_stride, const uint16_t *rows2,
                           int64_t n_first) {
    kernels_active().wsum_f16(w, w_stride, n_w, rows, row_stride, n_rows, dim, out, out_stride, rows2,
                              n_first < 0 ? n_rows : n_first);
}

void exp_ggml_rows(const float *x, float *y, int64_t n) { kernels_active().exp(x, y, n); }

void round_f16_rows(float *x, int64_t n) {
    const ActFn to_f16 = kernels_active().act[static_cast<uint32_t>(TensorType::F16)];
    constexpr int64_t kChunk = 256;
    uint16_t h[kChunk];
    for (int64_t i0 = 0; i0 < n; i0 += kChunk) {
        const int64_t m = std::min(kChunk, n - i0);
        if (to_f16)
            to_f16(x + i0, h, m);
        else
            quantize_act_row(TensorType::F16, x + i0, h, m);
        for (int64_t i = 0; i < m; ++i) x[i0 + i] = fp16_to_f32(h[i]);
    }
}

void delta_rule_step(float *S, int64_t hd, const float *q, const float *k, const float *v, float decay, float beta,
                     float scale, float *y) {
    kernels_active().delta_step(S, hd, q, k, v, decay, beta, scale, y);
}

ActRows convert_act_rows(const WeightView &w, const float *x, int64_t n_rows) {
    const Converted c = convert(w, x, n_rows, nullptr, kernels_active());
    return {c.data, c.stride};
}

void dot_rows(const WeightView &w, ActRows x, int n_x, float *out, int64_t out_stride) {
    rows_converted(w, kernels_active(), 0, w.n_out, {x.data, x.stride}, n_x, out, out_stride);
}

void matmul_rows(const WeightView &w, int64_t r0, int64_t r1, const float *x, int64_t P, float *y, int64_t y_stride) {
    const KernelTable &tab = kernels_active();
    const Converted xq = convert(w, x, P, nullptr, tab);
    rows_converted(w, tab, r0, r1, xq, P, y, y_stride);
}

void matmul(const WeightView &w, const float *x, int64_t P, float *y, ThreadPool *pool) {
    const KernelTable &tab = kernels_active();
    const Converted xq = convert(w, x, P, pool, tab);
    // Threads split whole tiles; packed weights only in whole groups.
    const int64_t unit = w.packed ? kPackRows : kTileRows;
    const int64_t tiles = (w.n_out + unit - 1) / unit;
    auto work = [&](int64_t t0, int64_t t1) {
        const int64_t r0 = t0 * unit, r1 = std::min(t1 * unit, w.n_out);
        rows_converted(w, tab, r0, r1, xq, P, y + r0, w.n_out);
    };
    if (pool)
        pool->parallel_for(tiles, work);
    else
        work(0, tiles);
}

}  // namespace llm
