#include "loader/streamer.h"

#include <chrono>

#include "core/error.h"

namespace llm {

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

uint64_t BlockStreamer::slot_bytes() const {
    uint64_t n = 0;
    for (const RingSlot &s : slots_) n += s.data.buf.capacity();
    return n;
}

void BlockStreamer::drop_slots() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_ready_.wait(lock, [&] {
        for (const RingSlot &s : slots_)
            if (s.state == State::LOADING) return false;
        return true;
    });
    queue_.clear();
    for (RingSlot &s : slots_) {
        if (s.state == State::IN_USE) continue;
        s.data.buf.clear();
        s.layer = -1;
        s.state = State::EMPTY;
        s.error = nullptr;
    }
}

BlockStreamer::RingSlot *BlockStreamer::find(uint32_t layer) {
    for (RingSlot &s : slots_)
        if (s.layer == static_cast<int64_t>(layer) && s.state != State::EMPTY) return &s;
    return nullptr;
}

// A slot that may be overwritten: not in use, not being filled, and not holding one of the blocks
// [keep_from, keep_from + keep_n) (cyclic) that are about to be used.
BlockStreamer::RingSlot *BlockStreamer::free_slot(uint32_t keep_from, uint32_t keep_n) {
    const uint32_t n = store_.n_units();
    RingSlot *best = nullptr;
    for (RingSlot &s : slots_) {
        if (s.state == State::IN_USE || s.state == State::LOADING) continue;
        if (s.state == State::EMPTY) return &s;
        const uint32_t dist = static_cast<uint32_t>((s.layer + n - keep_from) % n);
        if (dist < keep_n) continue;
        best = &s;
    }
    return best;
}

void BlockStreamer::schedule(uint32_t layer, RingSlot *slot) {
    slot->layer = layer;
    slot->state = State::LOADING;
    slot->error = nullptr;
    queue_.emplace_back(slot, layer);
    cv_io_.notify_one();
}

void BlockStreamer::prefetch_after(uint32_t layer) {
    const uint32_t n = store_.n_units();
    int wanted = 0;
    for (uint32_t step = 1; step <= n && wanted < depth_; ++step) {
        const uint32_t l = (layer + step) % n;
        if (store_.resident(l)) continue;
        ++wanted;
        if (find(l)) continue;
        RingSlot *s = free_slot(l, static_cast<uint32_t>(n));  // never evict anything nearer than l
        s = s ? s : free_slot(layer, step);
        if (!s) break;
        schedule(l, s);
    }
}

const BlockData &BlockStreamer::acquire(uint32_t layer) {
    if (const BlockData *r = store_.resident(layer)) return *r;

    if (depth_ == 0) {
        // Synchronous: one slot, read in place.
        RingSlot &s = slots_[0];
        if (s.layer != static_cast<int64_t>(layer) || s.state != State::READY) {
            s.layer = -1;
            s.state = State::EMPTY;
            const auto t0 = std::chrono::steady_clock::now();
            load_block(store_.source(), store_.tensors(layer), store_.stream_layout(layer), s.data, &stats_);
            s.data.experts = this;
            stats_.wait_ns += static_cast<uint64_t>(
                std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count());
            s.layer = layer;
        }
        s.state = State::IN_USE;
        return s.data;
    }

    std::unique_lock<std::mutex> lock(mu_);
    RingSlot *s = find(layer);
    if (!s) {
        s = free_slot(layer, 1);
        if (!s) fail(LLM_ERR_INTERNAL, "no free streaming slot for block {}", layer);
        schedule(layer, s);
    }
    prefetch_after(layer);
    if (s->state == State::LOADING) {
        const auto t0 = std::chrono::steady_clock::now();
        cv_ready_.wait(lock, [&] { return s->state != State::LOADING; });
        stats_.wait_ns += static_cast<uint64_t>(
            std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count());
    }
    s->state = State::IN_USE;
    if (s->error) {
        // The read ahead failed, possibly during an earlier call and on storage that has recovered
        // since: it was speculative, so its error is not this call's. Read once more, now that the
        // block is needed, and report only that read's failure.
        s->error = nullptr;
        lock.unlock();
        const auto t0 = std::chrono::steady_clock::now();
        try {
            load_block(store_.source(), store_.tensors(layer), store_.stream_layout(layer), s->data, &stats_);
            s->data.experts = this;
        } catch (...) {
            lock.lock();
            s->layer = -1;
            s->state = State::EMPTY;
            throw;
        }
        stats_.wait_ns += static_cast<uint64_t>(
            std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count());
    }
    return s->data;
}

void BlockStreamer::release(uint32_t layer) {
    if (store_.resident(layer)) return;
    if (depth_ == 0) {
        if (slots_[0].state == State::IN_USE) slots_[0].state = State::READY;
        return;
    }
    std::lock_guard<std::mutex> lock(mu_);
    if (RingSlot *s = find(layer); s && s->state == State::IN_USE) s->state = State::READY;
    cv_io_.notify_one();
}

const uint8_t *BlockStreamer::fetch(Slot s, const TensorInfo &t, uint32_t e) {
    AlignedBuffer &buf = expert_buf_[s == FFN_GATE_EXPS ? 0 : s == FFN_UP_EXPS ? 1 : 2];
    const uint64_t slab = t.ne[1] * t.row_bytes();
    buf.resize(slab);
    const auto t0 = std::chrono::steady_clock::now();
    store_.source().read(t, static_cast<uint64_t>(e) * slab, buf.data(), slab);
    stats_.add_read(slab);
    stats_.wait_ns += static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count());
    return buf.data();
}

void BlockStreamer::io_loop() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
        cv_io_.wait(lock, [&] { return stop_ || !queue_.empty(); });
        if (stop_) return;
        auto [slot, layer] = queue_.front();
        queue_.pop_front();
        lock.unlock();
        std::exception_ptr err;
        try {
            load_block(store_.source(), store_.tensors(layer), store_.stream_layout(layer), slot->data, &stats_);
            slot->data.experts = this;
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
