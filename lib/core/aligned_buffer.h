// A byte buffer aligned for SIMD loads; holds weights in their on-disk encoding.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <utility>

namespace llm {

class AlignedBuffer {
public:
    AlignedBuffer() = default;
    explicit AlignedBuffer(size_t n) { resize(n); }
    ~AlignedBuffer() { std::free(p_); }
    AlignedBuffer(AlignedBuffer &&o) noexcept
        : p_(std::exchange(o.p_, nullptr)), n_(std::exchange(o.n_, 0)), cap_(std::exchange(o.cap_, 0)) {}
    AlignedBuffer &operator=(AlignedBuffer &&o) noexcept {
        std::swap(p_, o.p_);
        std::swap(n_, o.n_);
        std::swap(cap_, o.cap_);
        return *this;
    }
    AlignedBuffer(const AlignedBuffer &) = delete;
    AlignedBuffer &operator=(const AlignedBuffer &) = delete;

    // Contents are unspecified afterwards. Memory is kept when n fits the capacity, so a streaming
    // slot reused for blocks of slightly different sizes never reallocates.
    void resize(size_t n);
    // Returns the memory to the system.
    void clear() {
        std::free(p_);
        p_ = nullptr;
        n_ = cap_ = 0;
    }
    size_t capacity() const { return cap_; }
    uint8_t *data() { return p_; }
    const uint8_t *data() const { return p_; }
    size_t size() const { return n_; }

private:
    // Page-aligned: weight slots are targets of O_DIRECT reads (see CachePolicy::DIRECT).
    static constexpr size_t kAlign = 4096;
    static constexpr size_t kHuge = size_t{2} << 20;
    uint8_t *p_ = nullptr;
    size_t n_ = 0;
    size_t cap_ = 0;
};

}  // namespace llm
