#include "loader/layer_store.h"

#include <algorithm>

#include "core/error.h"

namespace llm {

uint32_t ResidencyChoice::n_units() const {
    return static_cast<uint32_t>(std::count(units.begin(), units.end(), true));
}

ResidencyChoice choose_residency(uint64_t budget, const std::vector<uint64_t> &unit_bytes, uint64_t head_bytes,
                                 uint64_t slot_bytes, const std::vector<uint64_t> &unit_decode_bytes) {
    const size_t n = unit_bytes.size();
    ResidencyChoice c;
    c.units.assign(n, false);
    uint64_t all = 0;
    for (uint64_t b : unit_bytes) all += b;
    // If every unit fits, no slots are needed.
    if (all <= budget) {
        c.units.assign(n, true);
        c.head_resident = all + head_bytes <= budget;
        return c;
    }
    if (budget <= slot_bytes) return c;
    // Candidates by worth per byte, decreasing; the head (index n) after the units of its worth.
    auto worth = [&](size_t i) {  // as a fraction, compared by cross-multiplying: exact
        if (i == n) return std::pair<uint64_t, uint64_t>(1, 1);
        const uint64_t d = unit_decode_bytes.empty() ? unit_bytes[i] : unit_decode_bytes[i];
        return std::pair<uint64_t, uint64_t>(d, std::max<uint64_t>(unit_bytes[i], 1));
    };
    std::vector<size_t> order(n + 1);
    for (size_t i = 0; i <= n; ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
        const auto [da, ba] = worth(a);
        const auto [db, bb] = worth(b);
        return static_cast<unsigned __int128>(da) * bb > static_cast<unsigned __int128>(db) * ba;
    });
    uint64_t left = budget - slot_bytes;
    for (size_t i : order) {
        const uint64_t b = i == n ? head_bytes : unit_bytes[i];
        if (b > left) break;
        left -= b;
        if (i == n)
            c.head_resident = true;
        else
            c.units[i] = true;
    }
    return c;
}

BlockLayout plan_roles(const BlockTensors &bt, const std::array<bool, ROLE_COUNT> &want, uint64_t align) {
    std::vector<int> order;
    for (int s = 0; s < ROLE_COUNT; ++s)
        if (bt.t[s] && want[s]) order.push_back(s);
    std::sort(order.begin(), order.end(), [&](int a, int b) {
        return std::pair(bt.t[a]->shard, bt.t[a]->offset) < std::pair(bt.t[b]->shard, bt.t[b]->offset);
    });

    // Tensors separated by at most a little padding become one read; inside a run the buffer keeps
    // the file's layout, so each tensor keeps the file's alignment.
    constexpr uint64_t kMaxGap = 4096;
    const uint64_t a = std::max<uint64_t>(align, 1);
    const uint64_t buf_align = std::max<uint64_t>(align, 64);
    auto up = [](uint64_t x, uint64_t m) { return (x + m - 1) / m * m; };
    BlockLayout l;
    for (int s : order) {
        const TensorInfo *t = bt.t[s];
        if (l.runs.empty() || t->shard != l.runs.back().shard || t->offset < l.runs.back().file_end ||
            t->offset - l.runs.back().file_end > kMaxGap) {
            l.runs.push_back({t->offset / a * a, t->offset + t->nbytes, up(l.total, buf_align), t->shard});
        } else {
            l.runs.back().file_end = t->offset + t->nbytes;
        }
        auto &r = l.runs.back();
        if (a > 1) r.file_end = up(r.file_end, a);  // may pass the end of the file: see read_weights_aligned
        l.where[s] = r.buf_off + (t->offset - r.file_begin);
        l.used[s] = true;
        l.total = r.buf_off + r.bytes();
    }
    return l;
}

void read_unit(const WeightSource &src, const BlockTensors &bt, const BlockLayout &layout, BlockData &out,
               IoStats *stats) {
    out.maps.clear();
    out.buf.resize(layout.total);
    for (const auto &r : layout.runs) {
        ByteSource &file = src.bytes(r.shard);
        file.read_weights_aligned(r.file_begin, out.buf.data() + r.buf_off, r.bytes());
        if (stats) stats->add_read(std::min(r.file_end, file.size()) - r.file_begin);
    }
    for (int s = 0; s < ROLE_COUNT; ++s) out.ptr[s] = layout.used[s] ? out.buf.data() + layout.where[s] : nullptr;
    out.tensors = &bt;
    out.experts = nullptr;
}

bool map_unit(const WeightSource &src, const BlockTensors &bt, const BlockLayout &layout, BlockData &out,
              IoStats *stats) {
    for (int s = 0; s < ROLE_COUNT; ++s)
        if (layout.used[s] && bt.t[s]->offset % kMapAlign != 0) return false;
    // The slot's previous piece goes first, so the slot never holds two pieces' pages at once (the
    // peak RSS the memory plan counts).
    out.maps.clear();
    std::vector<MappedRange> maps(layout.runs.size());
    for (size_t i = 0; i < layout.runs.size(); ++i) {
        const auto &r = layout.runs[i];
        if (!src.bytes(r.shard).map_weights(r.file_begin, r.bytes(), maps[i])) return false;
    }
    for (int s = 0; s < ROLE_COUNT; ++s) {
        out.ptr[s] = nullptr;
        if (!layout.used[s]) continue;
        // The run holding tensor s: the one whose buffer range has its offset.
        for (size_t i = 0; i < layout.runs.size(); ++i) {
            const auto &r = layout.runs[i];
            if (layout.where[s] >= r.buf_off && layout.where[s] < r.buf_off + r.bytes())
                out.ptr[s] = maps[i].data() + (layout.where[s] - r.buf_off);
        }
    }
    if (stats)
        for (const auto &r : layout.runs) stats->add_read(r.bytes());
    out.maps = std::move(maps);
    out.buf.clear();  // a slot that once copied gives its memory back
    out.tensors = &bt;
    out.experts = nullptr;
    return true;
}

// A mapped piece holds whole pages (each run from the page of its first byte to that of its last):
// what its slot costs in RSS, a little more than the copy's.
uint64_t LayerStore::slot_bytes(const BlockLayout &l) const {
    if (!maps()) return l.total;
    const uint64_t page = os_page_bytes();
    uint64_t n = 0;
    for (const auto &r : l.runs) n += (r.file_end + page - 1) / page * page - r.file_begin / page * page;
    return std::max(n, l.total);
}

namespace {

template <class Pred>
std::array<bool, ROLE_COUNT> roles_where(Pred pred) {
    std::array<bool, ROLE_COUNT> m{};
    for (int s = 0; s < ROLE_COUNT; ++s) m[s] = pred(s);
    return m;
}

}  // namespace

LayerStore::LayerStore(const WeightSource &src, const std::vector<BlockTensors> &blocks, const LayerStoreOptions &opt)
    : src_(src), blocks_(blocks), opt_(opt) {
    if (opt_.prefetch_depth < 0) opt_.prefetch_depth = 0;
    const uint64_t align = opt_.cache == CachePolicy::DIRECT ? kDirectAlign : 0;
    layouts_.reserve(blocks.size() * kUnitsPerBlock);
    for (const BlockTensors &bt : blocks) {
        vector_layouts_.push_back(plan_roles(bt, roles_where([](int s) { return !kRoleTraits[s].matrix; }), align));
        vector_bytes_ += vector_layouts_.back().total;
        for (uint32_t part = 0; part < kUnitsPerBlock; ++part) {
            layouts_.push_back(plan_roles(
                bt, roles_where([&](int s) { return kRoleTraits[s].matrix && kRoleTraits[s].part == part; }), align));
            max_unit_ = std::max(max_unit_, layouts_.back().total);
            total_blocks_ += layouts_.back().total;
        }
    }
    total_blocks_ += vector_bytes_;
    for (const BlockTensors &bt : blocks)
        for (TensorRole s : {FFN_GATE_EXPS, FFN_UP_EXPS, FFN_DOWN_EXPS})
            if (const TensorInfo *t = bt.t[s]) max_slab_ = std::max(max_slab_, t->ne[1] * t->row_bytes());
    if (maps() && max_slab_ > 0) max_slab_ += 2 * os_page_bytes();  // a mapped slab's first and last pages
    resident_.resize(layouts_.size());

    // Streamed pieces. A slot must hold the largest matrix anyway; smaller matrices the recipe uses
    // one after another (a GQA model's K and V, often the whole attention half) share a piece as long
    // as it stays within that size: fewer waits and, where they are adjacent in the file, one read.
    auto is_streamed = [](int s, uint32_t part) {
        return kRoleTraits[s].matrix && !kRoleTraits[s].expert && kRoleTraits[s].part == part;
    };
    auto only = [](int s) { return roles_where([s](int x) { return x == s; }); };
    uint64_t cap = 0;
    for (uint32_t u = 0; u < n_units(); ++u)
        for (int s = 0; s < ROLE_COUNT; ++s)
            if (tensors(u).t[s] && is_streamed(s, u % kUnitsPerBlock))
                cap = std::max(cap, plan_roles(tensors(u), only(s), align).total);
    piece_of_.assign(static_cast<size_t>(n_units()) * ROLE_COUNT, UINT32_MAX);
    for (uint32_t u = 0; u < n_units(); ++u) {
        const BlockTensors &bt = tensors(u);
        std::array<bool, ROLE_COUNT> cur{};
        bool any = false;
        auto close = [&] {
            if (!any) return;
            pieces_.push_back({u, plan_roles(bt, cur, align)});
            max_piece_ = std::max(max_piece_, slot_bytes(pieces_.back().layout));
            for (int s = 0; s < ROLE_COUNT; ++s)
                if (cur[s]) piece_of_[u * ROLE_COUNT + s] = n_pieces() - 1;
            cur = {};
            any = false;
        };
        for (int s = 0; s < ROLE_COUNT; ++s) {
            if (!bt.t[s] || !is_streamed(s, u % kUnitsPerBlock)) continue;
            std::array<bool, ROLE_COUNT> grown = cur;
            grown[s] = true;
            if (any && plan_roles(bt, grown, align).total > cap) close();
            cur[s] = true;
            any = true;
        }
        close();
    }
}

uint64_t LayerStore::stream_slot_bytes() const {
    // Read ahead, the expert slabs take a ring of 3 per depth step too (BlockStreamer::plan).
    return static_cast<uint64_t>(1 + opt_.prefetch_depth) * (max_piece_ + 3 * max_slab_);
}

std::vector<uint64_t> LayerStore::unit_bytes() const {
    std::vector<uint64_t> v;
    v.reserve(layouts_.size());
    for (const BlockLayout &l : layouts_) v.push_back(l.total);
    return v;
}

std::vector<uint64_t> LayerStore::unit_decode_bytes(double routed) const {
    std::vector<uint64_t> v = unit_bytes();
    for (uint32_t u = 0; u < n_units(); ++u)
        for (int s = 0; s < ROLE_COUNT; ++s)
            if (const TensorInfo *t = tensors(u).t[s]; t && layouts_[u].used[s] && kRoleTraits[s].expert)
                v[u] -= t->nbytes - static_cast<uint64_t>(static_cast<double>(t->nbytes) * routed);
    return v;
}

void LayerStore::keep_resident(const std::vector<bool> &keep, const std::function<bool(float)> &progress) {
    auto kept = [&](uint32_t u) { return u < keep.size() && keep[u]; };
    if (vectors_.empty()) {
        vectors_.resize(n_layer());
        for (uint32_t l = 0; l < n_layer(); ++l) read_unit(src_, blocks_[l], vector_layouts_[l], vectors_[l], nullptr);
    }
    for (uint32_t u = 0; u < n_units(); ++u)
        if (!kept(u)) resident_[u].reset();
    uint32_t missing = 0;
    for (uint32_t u = 0; u < n_units(); ++u) missing += kept(u) && !resident_[u] ? 1 : 0;
    uint32_t done = 0;
    for (uint32_t u = 0; u < n_units(); ++u) {
        if (!kept(u) || resident_[u]) continue;
        auto b = std::make_unique<BlockData>();
        read_unit(src_, tensors(u), layouts_[u], *b, nullptr);
        pack_block(*b);  // resident units are packed once; stream slots stay in file layout
        resident_[u] = std::move(b);
        ++done;
        if (progress && !progress(static_cast<float>(done) / static_cast<float>(missing))) {
            fail(LLM_ERR_CANCELLED, "model load cancelled by the progress callback");
        }
    }
}

uint64_t LayerStore::resident_bytes() const {
    uint64_t n = vectors_.empty() ? 0 : vector_bytes_;
    for (const auto &b : resident_)
        if (b) n += b->buf.size();
    return n;
}

uint32_t LayerStore::n_resident_units() const {
    uint32_t n = 0;
    for (const auto &b : resident_) n += b ? 1 : 0;
    return n;
}

uint32_t LayerStore::n_resident_layers() const {
    uint32_t n = 0;
    for (uint32_t l = 0; l < n_layer(); ++l) n += resident_[unit_index(l, 0)] && resident_[unit_index(l, 1)] ? 1 : 0;
    return n;
}

const char *name(Residency r) {
    switch (r) {
    case Residency::RESIDENT: return "resident";
    case Residency::STREAMED: return "streamed";
    case Residency::BUDGET: return "budget";
    }
    return "?";
}

}  // namespace llm
