// A session's view of the blocks: resident ones come straight from the LayerStore; the others are
// read into a ring of 1 + prefetch_depth slots. With depth d > 0 an I/O thread reads the next d
// streamed blocks (in layer order, wrapping to the next token) while the current one computes.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "loader/io_stats.h"
#include "loader/layer_store.h"

namespace llm {

class BlockStreamer : public ExpertFetcher {
public:
    BlockStreamer(const LayerStore &store, IoStats &stats);
    ~BlockStreamer();
    BlockStreamer(const BlockStreamer &) = delete;
    BlockStreamer &operator=(const BlockStreamer &) = delete;

    // The block's weights, valid until release(layer). Blocks until a streamed block has arrived.
    const BlockData &acquire(uint32_t layer);
    void release(uint32_t layer);
    // Frees the slots (e.g. after the RAM budget was lowered, or when the session goes idle).
    void drop_slots();
    uint64_t slot_bytes() const;
    // ExpertFetcher: reads expert e's slab of a packed expert tensor (synchronously).
    const uint8_t *fetch(Slot s, const TensorInfo &t, uint32_t e) override;

private:
    enum class State { EMPTY, LOADING, READY, IN_USE };
    struct RingSlot {
        int64_t layer = -1;
        State state = State::EMPTY;
        BlockData data;
        std::exception_ptr error;
    };

    RingSlot *find(uint32_t layer);
    RingSlot *free_slot(uint32_t keep_from, uint32_t keep_n);
    void schedule(uint32_t layer, RingSlot *slot);
    void prefetch_after(uint32_t layer);
    void io_loop();

    const LayerStore &store_;
    IoStats &stats_;
    const int depth_;
    std::vector<RingSlot> slots_;
    std::mutex mu_;
    std::condition_variable cv_io_, cv_ready_;
    std::deque<std::pair<RingSlot *, uint32_t>> queue_;
    bool stop_ = false;
    std::thread io_;
    AlignedBuffer expert_buf_[3];  // gate, up, down slabs of the expert being computed
};

}  // namespace llm
