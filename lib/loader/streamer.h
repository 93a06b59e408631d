// A session's view of the units (half-blocks, loader/block.h): resident ones come straight from the
// LayerStore; the others are read into a ring of 1 + prefetch_depth slots. With depth d > 0 an I/O
// thread reads the next d streamed units (in unit order, wrapping to the next token) while the
// current one computes. The I/O thread reads only while a session call is running (see quiesce()):
// hosts are promised no callback after a call returns.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "loader/block.h"
#include "loader/io_stats.h"
#include "loader/layer_store.h"

namespace llm {

class BlockStreamer : public ExpertFetcher {
public:
    BlockStreamer(const LayerStore &store, IoStats &stats);
    ~BlockStreamer();
    BlockStreamer(const BlockStreamer &) = delete;
    BlockStreamer &operator=(const BlockStreamer &) = delete;

    // A unit's weights, held until the lease goes out of scope; then a streamed unit's slot may be
    // reused.
    class Lease {
    public:
        Lease(Lease &&o) noexcept : owner_(std::exchange(o.owner_, nullptr)), unit_(o.unit_), data_(o.data_) {}
        Lease(const Lease &) = delete;
        Lease &operator=(const Lease &) = delete;
        Lease &operator=(Lease &&) = delete;
        ~Lease() {
            if (owner_) owner_->release(unit_);
        }
        const BlockData &data() const { return *data_; }

    private:
        friend class BlockStreamer;
        Lease(BlockStreamer *owner, uint32_t unit, const BlockData *data) : owner_(owner), unit_(unit), data_(data) {}
        BlockStreamer *owner_;
        uint32_t unit_;
        const BlockData *data_;
    };

    // Unit 2·layer + part. Waits until a streamed unit has arrived (reading it here at depth 0).
    Lease acquire(uint32_t unit);
    // ExpertFetcher: reads expert e's slab of a packed expert tensor (synchronously).
    const uint8_t *fetch(Slot s, const TensorInfo &t, uint32_t e) override;
    // Stops the read-ahead: drops the reads not yet started and waits for the one in flight (a single
    // read_at at most), so no host callback runs once this returns. Called at the end of every session
    // call: the next call schedules again what it needs; units already read stay in their slots.
    void quiesce();

private:
    enum class State { EMPTY, LOADING, READY, IN_USE };
    struct RingSlot {
        int64_t unit = -1;
        State state = State::EMPTY;
        BlockData data;
        std::exception_ptr error;
    };

    const BlockData &acquire_data(uint32_t unit);
    void release(uint32_t unit);
    void read_into(uint32_t unit, BlockData &out);
    void read_waiting(uint32_t unit, BlockData &out);
    RingSlot *find(uint32_t unit);
    RingSlot *free_slot(uint32_t keep_from, uint32_t keep_n);
    void schedule(uint32_t unit, RingSlot *slot);
    void prefetch_after(uint32_t unit);
    void io_loop();

    const LayerStore &store_;
    IoStats &stats_;
    const int depth_;
    std::vector<RingSlot> slots_;
    std::mutex mu_;
    std::condition_variable cv_io_, cv_ready_;
    std::deque<std::pair<RingSlot *, uint32_t>> queue_;  // (slot, unit) for the I/O thread
    bool stop_ = false;
    std::thread io_;
    AlignedBuffer expert_buf_[3];  // gate, up, down slabs of the expert being computed
};

}  // namespace llm
