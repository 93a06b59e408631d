// A session's view of the block weights (loader/block.h): resident units come straight from the
// LayerStore; the others are streamed piece by piece (a matrix, or a few small consecutive ones)
// through a ring of 1 + prefetch_depth slots, each the size of the largest piece. With depth d > 0
// an I/O thread reads the next d streamed pieces (in the order a forward pass uses them, wrapping to
// the next token) while the current one computes. The I/O thread reads only while a session call is
// running (see quiesce()): hosts are promised no callback after a call returns.
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

    // Weights held until the lease goes out of scope; then a streamed piece's slot may be reused.
    class Lease {
    public:
        Lease(Lease &&o) noexcept : owner_(std::exchange(o.owner_, nullptr)), piece_(o.piece_), data_(o.data_) {}
        Lease(const Lease &) = delete;
        Lease &operator=(const Lease &) = delete;
        Lease &operator=(Lease &&) = delete;
        ~Lease() {
            if (owner_) owner_->release(piece_);
        }
        // The resident unit, or the streamed piece (only its slots are set); expert() works on both.
        const BlockData &data() const { return *data_; }
        WeightView view(TensorRole s) const { return data_->view(s); }

    private:
        friend class BlockStreamer;
        Lease(BlockStreamer *owner, uint32_t piece, const BlockData *data)
            : owner_(owner), piece_(piece), data_(data) {}
        BlockStreamer *owner_;  // null for a resident unit
        uint32_t piece_;
        const BlockData *data_;
    };

    // Matrix slot s of unit 2·layer + part (the whole unit if it is resident). Waits until a
    // streamed piece has arrived (reading it here at depth 0).
    Lease acquire(uint32_t unit, TensorRole s);
    // The norms and biases of a layer (always resident).
    const BlockData &vectors(uint32_t layer) const { return store_.vectors(layer); }
    // ExpertFetcher: plan() queues the slabs for the I/O thread (depth > 0); fetch() returns expert e's
    // slab of a packed expert tensor, read ahead if it was the plan's next, else read here. A slab
    // stays valid until the next fetch.
    void plan(const BlockTensors &bt, const std::vector<std::pair<TensorRole, uint32_t>> &order) override;
    const uint8_t *fetch(TensorRole s, const TensorInfo &t, uint32_t e) override;
    // Stops the read-ahead: drops the reads not yet started and waits for the one in flight (a single
    // read_at at most), so no host callback runs once this returns. Called at the end of every session
    // call: the next call schedules again what it needs; pieces already read stay in their slots.
    void quiesce();

private:
    enum class State { EMPTY, LOADING, READY, IN_USE };
    struct RingSlot {
        int64_t piece = -1;
        State state = State::EMPTY;
        BlockData data;
        std::exception_ptr error;
    };

    const BlockData &acquire_piece(uint32_t piece);
    void release(uint32_t piece);
    bool streamed(uint32_t piece) const { return !store_.resident(store_.piece(piece).unit); }
    void read_into(uint32_t piece, BlockData &out);
    const uint8_t *load_slab(const TensorInfo &t, uint32_t e, AlignedBuffer &buf, MappedRange &map);
    void read_waiting(uint32_t piece, BlockData &out);
    RingSlot *find(uint32_t piece);
    RingSlot *free_slot(uint32_t keep_from, uint32_t keep_n);
    void schedule(uint32_t piece, RingSlot *slot);
    void prefetch_after(uint32_t piece);
    void io_loop();
    bool expert_readable() const;
    void wait_expert_reads(std::unique_lock<std::mutex> &lock);

    const LayerStore &store_;
    IoStats &stats_;
    const int depth_;
    std::vector<RingSlot> slots_;
    std::mutex mu_;
    std::condition_variable cv_io_, cv_ready_;
    std::deque<std::pair<RingSlot *, uint32_t>> queue_;  // (slot, piece) for the I/O thread
    bool stop_ = false;
    std::thread io_;
    AlignedBuffer expert_buf_[3];  // gate, up, down slabs read here (depth 0, or off the plan)
    MappedRange expert_map_[3];    // or mapped here (MAP)

    // The planned slabs: job j goes to x_buf_[j % size]; it may be read once job j - size, the slab's
    // previous holder, is no longer in use (an earlier job than the one fetched last).
    struct ExpertJob {
        const TensorInfo *t;
        TensorRole role;
        uint32_t e;
        State state = State::EMPTY;
        std::exception_ptr error;
        const uint8_t *data = nullptr;  // the slab, once READY: in x_buf_ or x_map_ at j % size
    };
    std::vector<ExpertJob> x_jobs_;
    std::vector<AlignedBuffer> x_buf_;
    std::vector<MappedRange> x_map_;
    size_t x_next_read_ = 0, x_next_fetch_ = 0;
    int64_t x_in_use_ = -1;
};

}  // namespace llm
