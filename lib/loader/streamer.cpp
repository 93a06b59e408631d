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
    if (depth_ > 0) io_ = std::thread([this] { io_loop(); });
}

BlockStreamer::~BlockStreamer() {
    {
        std::lock_guard<std::mutex> lock(mu_);
        stop_ = true;
    }
    cv_io_.notify_all();
    if (io_.joinable()) io_.join();
}

void BlockStreamer::read_into(uint32_t unit, BlockData &out) {
    read_unit(store_.source(), store_.tensors(unit), store_.stream_layout(unit), out, &stats_);
    out.experts = this;
}

// A read the compute thread waits for: its time counts as I/O wait.
void BlockStreamer::read_waiting(uint32_t unit, BlockData &out) {
    const auto t0 = std::chrono::steady_clock::now();
    read_into(unit, out);
    add_wait(stats_, t0);
}

BlockStreamer::RingSlot *BlockStreamer::find(uint32_t unit) {
    for (RingSlot &s : slots_)
        if (s.unit == static_cast<int64_t>(unit) && s.state != State::EMPTY) return &s;
    return nullptr;
}

// A slot that may be overwritten: not in use, not being filled, and not holding one of the units
// [keep_from, keep_from + keep_n) (cyclic) that are about to be used.
BlockStreamer::RingSlot *BlockStreamer::free_slot(uint32_t keep_from, uint32_t keep_n) {
    const uint32_t n = store_.n_units();
    RingSlot *best = nullptr;
    for (RingSlot &s : slots_) {
        if (s.state == State::IN_USE || s.state == State::LOADING) continue;
        if (s.state == State::EMPTY) return &s;
        const uint32_t dist = static_cast<uint32_t>((s.unit + n - keep_from) % n);
        if (dist < keep_n) continue;
        best = &s;
    }
    return best;
}

void BlockStreamer::schedule(uint32_t unit, RingSlot *slot) {
    slot->unit = unit;
    slot->state = State::LOADING;
    slot->error = nullptr;
    queue_.emplace_back(slot, unit);
    cv_io_.notify_one();
}

// Schedules the next depth_ streamed units after `unit` (wrapping to the next token's first ones).
void BlockStreamer::prefetch_after(uint32_t unit) {
    const uint32_t n = store_.n_units();
    int wanted = 0;
    for (uint32_t step = 1; step <= n && wanted < depth_; ++step) {
        const uint32_t u = (unit + step) % n;
        if (store_.resident(u)) continue;
        ++wanted;
        if (find(u)) continue;
        RingSlot *s = free_slot(u, static_cast<uint32_t>(n));  // never evict anything nearer than u
        s = s ? s : free_slot(unit, step);
        if (!s) break;
        schedule(u, s);
    }
}

BlockStreamer::Lease BlockStreamer::acquire(uint32_t unit) {
    const BlockData &data = acquire_data(unit);
    return Lease(this, unit, &data);
}

const BlockData &BlockStreamer::acquire_data(uint32_t unit) {
    if (const BlockData *r = store_.resident(unit)) return *r;

    if (depth_ == 0) {
        // Synchronous: one slot, read in place.
        RingSlot &s = slots_[0];
        if (s.unit != static_cast<int64_t>(unit) || s.state != State::READY) {
            s.unit = -1;
            s.state = State::EMPTY;
            read_waiting(unit, s.data);
            s.unit = unit;
        }
        s.state = State::IN_USE;
        return s.data;
    }

    std::unique_lock<std::mutex> lock(mu_);
    RingSlot *s = find(unit);
    if (!s) {
        s = free_slot(unit, 1);
        if (!s) fail(LLM_ERR_INTERNAL, "no free streaming slot for unit {}", unit);
        schedule(unit, s);
    }
    prefetch_after(unit);
    if (s->state == State::LOADING) {
        const auto t0 = std::chrono::steady_clock::now();
        cv_ready_.wait(lock, [&] { return s->state != State::LOADING; });
        add_wait(stats_, t0);
    }
    s->state = State::IN_USE;
    if (s->error) {
        // The read ahead failed, possibly during an earlier call and on storage that has recovered
        // since: it was speculative, so its error is not this call's. Read once more, now that the
        // unit is needed, and report only that read's failure.
        s->error = nullptr;
        lock.unlock();
        try {
            read_waiting(unit, s->data);
        } catch (...) {
            lock.lock();
            s->unit = -1;
            s->state = State::EMPTY;
            throw;
        }
    }
    return s->data;
}

void BlockStreamer::release(uint32_t unit) {
    if (store_.resident(unit)) return;
    if (depth_ == 0) {
        if (slots_[0].state == State::IN_USE) slots_[0].state = State::READY;
        return;
    }
    std::lock_guard<std::mutex> lock(mu_);
    if (RingSlot *s = find(unit); s && s->state == State::IN_USE) s->state = State::READY;
    cv_io_.notify_one();
}

const uint8_t *BlockStreamer::fetch(Slot s, const TensorInfo &t, uint32_t e) {
    AlignedBuffer &buf = expert_buf_[s == FFN_GATE_EXPS ? 0 : s == FFN_UP_EXPS ? 1 : 2];
    const uint64_t slab = t.ne[1] * t.row_bytes();
    buf.resize(slab);
    const auto t0 = std::chrono::steady_clock::now();
    store_.source().read(t, static_cast<uint64_t>(e) * slab, buf.data(), slab);
    stats_.add_read(slab);
    add_wait(stats_, t0);
    return buf.data();
}

void BlockStreamer::quiesce() {
    if (depth_ == 0) return;
    std::unique_lock<std::mutex> lock(mu_);
    for (auto &[slot, unit] : queue_) {
        slot->unit = -1;
        slot->state = State::EMPTY;
    }
    queue_.clear();
    // Whatever is still LOADING was taken by the I/O thread: its read is in progress.
    cv_ready_.wait(lock, [&] {
        return std::none_of(slots_.begin(), slots_.end(), [](const RingSlot &s) { return s.state == State::LOADING; });
    });
}

void BlockStreamer::io_loop() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
        cv_io_.wait(lock, [&] { return stop_ || !queue_.empty(); });
        if (stop_) return;
        auto [slot, unit] = queue_.front();
        queue_.pop_front();
        lock.unlock();
        std::exception_ptr err;
        try {
            read_into(unit, slot->data);
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
