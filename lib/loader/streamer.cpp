#include "loader/streamer.h"

#include <algorithm>
#include <chrono>

#include "core/error.h"

namespace llm {
namespace {

void add_wait(IoStats &stats, std::chrono::steady_clock::time_point t0) {
    stats.wait_ns += static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count());
}

}  // namespace

BlockStreamer::BlockStreamer(const LayerStore &store, IoStats &stats)
    : store_(store), stats_(stats), depth_(store.prefetch_depth()), slots_(1 + store.prefetch_depth()) {
    if (depth_ > 0) {
        x_buf_.resize(3 * static_cast<size_t>(1 + depth_));
        x_map_.resize(x_buf_.size());
        io_ = std::thread([this] { io_loop(); });
    }
}

BlockStreamer::~BlockStreamer() {
    {
        std::lock_guard<std::mutex> lock(mu_);
        stop_ = true;
    }
    cv_io_.notify_all();
    if (io_.joinable()) io_.join();
}

void BlockStreamer::read_into(uint32_t piece, BlockData &out) {
    const StreamPiece &p = store_.piece(piece);
    // Under MAP the slot maps the piece's pages instead (the previous piece's are unmapped as the
    // slot is reused, so no more pieces are mapped than slots); streamed pieces are never repacked,
    // so the kernels take the file's bytes as they are. A piece that cannot be mapped is copied.
    if (!store_.maps() || !map_unit(store_.source(), store_.tensors(p.unit), p.layout, out, &stats_))
        read_unit(store_.source(), store_.tensors(p.unit), p.layout, out, &stats_);
    out.experts = this;
}

// Expert e's slab of t, mapped (MAP; into map) or read (into buf): the one not used is emptied, so a
// slab ring position holds one expert's bytes either way.
const uint8_t *BlockStreamer::load_slab(const TensorInfo &t, uint32_t e, AlignedBuffer &buf, MappedRange &map) {
    const uint64_t slab = t.ne[1] * t.row_bytes();
    const uint64_t off = static_cast<uint64_t>(e) * slab;
    if (store_.maps() && (t.offset + off) % kMapAlign == 0 &&
        store_.source().bytes(t.shard).map_weights(t.offset + off, slab, map)) {
        buf.clear();
        stats_.add_read(slab);
        return map.data();
    }
    map.reset();
    buf.resize(slab);
    store_.source().read(t, off, buf.data(), slab);
    stats_.add_read(slab);
    return buf.data();
}

// A read the compute thread waits for: its time counts as I/O wait.
void BlockStreamer::read_waiting(uint32_t piece, BlockData &out) {
    const auto t0 = std::chrono::steady_clock::now();
    read_into(piece, out);
    add_wait(stats_, t0);
}

BlockStreamer::RingSlot *BlockStreamer::find(uint32_t piece) {
    for (RingSlot &s : slots_)
        if (s.piece == static_cast<int64_t>(piece) && s.state != State::EMPTY) return &s;
    return nullptr;
}

// A slot that may be overwritten: not in use, not being filled, and not holding one of the pieces
// [keep_from, keep_from + keep_n) (cyclic) that are about to be used.
BlockStreamer::RingSlot *BlockStreamer::free_slot(uint32_t keep_from, uint32_t keep_n) {
    const uint32_t n = store_.n_pieces();
    RingSlot *best = nullptr;
    for (RingSlot &s : slots_) {
        if (s.state == State::IN_USE || s.state == State::LOADING) continue;
        if (s.state == State::EMPTY) return &s;
        const uint32_t dist = static_cast<uint32_t>((s.piece + n - keep_from) % n);
        if (dist < keep_n) continue;
        best = &s;
    }
    return best;
}

void BlockStreamer::schedule(uint32_t piece, RingSlot *slot) {
    slot->piece = piece;
    slot->state = State::LOADING;
    slot->error = nullptr;
    queue_.emplace_back(slot, piece);
    cv_io_.notify_one();
}

// Schedules the next depth_ streamed pieces after `piece` (wrapping to the next token's first ones).
void BlockStreamer::prefetch_after(uint32_t piece) {
    const uint32_t n = store_.n_pieces();
    int wanted = 0;
    for (uint32_t step = 1; step <= n && wanted < depth_; ++step) {
        const uint32_t p = (piece + step) % n;
        if (!streamed(p)) continue;
        ++wanted;
        if (find(p)) continue;
        RingSlot *s = free_slot(p, n);  // never evict anything nearer than p
        s = s ? s : free_slot(piece, step);
        if (!s) break;
        schedule(p, s);
    }
}

BlockStreamer::Lease BlockStreamer::acquire(uint32_t unit, TensorRole role) {
    if (const BlockData *r = store_.resident(unit)) return Lease(nullptr, 0, r);
    const uint32_t piece = store_.piece_of(unit, role);
    if (piece == UINT32_MAX) fail(LLM_ERR_INTERNAL, "tensor {} of unit {} is in no streamed piece", name(role), unit);
    const BlockData &data = acquire_piece(piece);
    return Lease(this, piece, &data);
}

const BlockData &BlockStreamer::acquire_piece(uint32_t piece) {
    if (depth_ == 0) {
        // Synchronous: one slot, read in place (a piece used twice in a row is read once).
        RingSlot &s = slots_[0];
        if (s.piece != static_cast<int64_t>(piece) || s.state != State::READY) {
            s.piece = -1;
            s.state = State::EMPTY;
            read_waiting(piece, s.data);
            s.piece = piece;
        }
        s.state = State::IN_USE;
        return s.data;
    }

    std::unique_lock<std::mutex> lock(mu_);
    RingSlot *s = find(piece);
    if (!s) {
        s = free_slot(piece, 1);
        if (!s) fail(LLM_ERR_INTERNAL, "no free streaming slot for piece {}", piece);
        schedule(piece, s);
    }
    prefetch_after(piece);
    if (s->state == State::LOADING) {
        const auto t0 = std::chrono::steady_clock::now();
        cv_ready_.wait(lock, [&] { return s->state != State::LOADING; });
        add_wait(stats_, t0);
    }
    s->state = State::IN_USE;
    if (s->error) {
        // The read ahead failed, possibly during an earlier call and on storage that has recovered
        // since: it was speculative, so its error is not this call's. Read once more, now that the
        // piece is needed, and report only that read's failure.
        s->error = nullptr;
        lock.unlock();
        try {
            read_waiting(piece, s->data);
        } catch (...) {
            lock.lock();
            s->piece = -1;
            s->state = State::EMPTY;
            throw;
        }
    }
    return s->data;
}

void BlockStreamer::release(uint32_t piece) {
    if (depth_ == 0) {
        if (slots_[0].state == State::IN_USE) slots_[0].state = State::READY;
        return;
    }
    std::lock_guard<std::mutex> lock(mu_);
    if (RingSlot *s = find(piece); s && s->state == State::IN_USE) s->state = State::READY;
    cv_io_.notify_one();
}

bool BlockStreamer::expert_readable() const {
    const size_t j = x_next_read_, R = x_buf_.size();
    return j < x_jobs_.size() && (j < R || static_cast<int64_t>(j - R) < x_in_use_);
}

void BlockStreamer::wait_expert_reads(std::unique_lock<std::mutex> &lock) {
    cv_ready_.wait(lock, [&] {
        return std::none_of(x_jobs_.begin(), x_jobs_.end(), [](const ExpertJob &j) { return j.state == State::LOADING; });
    });
}

void BlockStreamer::plan(const BlockTensors &bt, const std::vector<std::pair<TensorRole, uint32_t>> &order) {
    if (depth_ == 0) return;
    std::unique_lock<std::mutex> lock(mu_);
    wait_expert_reads(lock);  // an abandoned plan's read still writing into a slab
    x_jobs_.clear();
    for (const auto &[role, e] : order) x_jobs_.push_back({bt.t[role], role, e, State::EMPTY, nullptr});
    x_next_read_ = x_next_fetch_ = 0;
    x_in_use_ = -1;
    cv_io_.notify_one();
}

const uint8_t *BlockStreamer::fetch(TensorRole s, const TensorInfo &t, uint32_t e) {
    if (depth_ > 0) {
        std::unique_lock<std::mutex> lock(mu_);
        const size_t j = x_next_fetch_;
        if (j < x_jobs_.size() && x_jobs_[j].t == &t && x_jobs_[j].role == s && x_jobs_[j].e == e) {
            ExpertJob &job = x_jobs_[j];
            x_next_fetch_ = j + 1;
            x_in_use_ = static_cast<int64_t>(j);  // the slab of job j - 1 is free now
            cv_io_.notify_one();
            if (job.state != State::READY) {
                const auto t0 = std::chrono::steady_clock::now();
                cv_ready_.wait(lock, [&] { return job.state == State::READY; });
                add_wait(stats_, t0);
            }
            if (job.error) {
                // Read ahead, so not this call's failure until a read of its own fails (as pieces).
                job.error = nullptr;
                lock.unlock();
                const auto t0 = std::chrono::steady_clock::now();
                job.data = load_slab(t, e, x_buf_[j % x_buf_.size()], x_map_[j % x_map_.size()]);
                add_wait(stats_, t0);
            }
            return job.data;
        }
        // Off the plan: no read ahead from here on.
        wait_expert_reads(lock);
        x_jobs_.clear();
        x_next_read_ = x_next_fetch_ = 0;
    }
    const int k = s == FFN_GATE_EXPS ? 0 : s == FFN_UP_EXPS ? 1 : 2;
    const auto t0 = std::chrono::steady_clock::now();
    const uint8_t *data = load_slab(t, e, expert_buf_[k], expert_map_[k]);
    add_wait(stats_, t0);
    return data;
}

void BlockStreamer::quiesce() {
    if (depth_ == 0) return;
    std::unique_lock<std::mutex> lock(mu_);
    for (auto &[slot, piece] : queue_) {
        slot->piece = -1;
        slot->state = State::EMPTY;
    }
    queue_.clear();
    x_jobs_.resize(x_next_read_);  // planned slabs not yet started are dropped
    // Whatever is still LOADING was taken by the I/O thread: its read is in progress.
    cv_ready_.wait(lock, [&] {
        return std::none_of(slots_.begin(), slots_.end(), [](const RingSlot &s) { return s.state == State::LOADING; });
    });
    wait_expert_reads(lock);
}

void BlockStreamer::io_loop() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
        cv_io_.wait(lock, [&] { return stop_ || !queue_.empty() || expert_readable(); });
        if (stop_) return;
        if (expert_readable()) {  // the computing expert loop needs these before any later piece
            const size_t j = x_next_read_++;
            ExpertJob &job = x_jobs_[j];
            job.state = State::LOADING;
            lock.unlock();
            std::exception_ptr err;
            try {
                job.data = load_slab(*job.t, job.e, x_buf_[j % x_buf_.size()], x_map_[j % x_map_.size()]);
            } catch (...) {
                err = std::current_exception();
            }
            lock.lock();
            job.error = err;
            job.state = State::READY;
            cv_ready_.notify_all();
            continue;
        }
        auto [slot, piece] = queue_.front();
        queue_.pop_front();
        lock.unlock();
        std::exception_ptr err;
        try {
            read_into(piece, slot->data);
        } catch (...) {
            err = std::current_exception();
        }
        lock.lock();
        slot->error = err;
        slot->state = State::READY;
        cv_ready_.notify_all();
    }
}

}  // namespace llm
