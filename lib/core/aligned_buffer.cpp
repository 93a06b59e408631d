#include "core/aligned_buffer.h"

#include <stdlib.h>  // posix_memalign

#include <new>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace llm {

void AlignedBuffer::resize(size_t n) {
    if (n <= cap_) {
        n_ = n;
        return;
    }
    std::free(p_);
    p_ = nullptr;
    n_ = cap_ = 0;
    void *p = nullptr;
    if (posix_memalign(&p, n >= kHuge ? kHuge : kAlign, (n + kAlign - 1) / kAlign * kAlign) != 0) throw std::bad_alloc();
    p_ = static_cast<uint8_t *>(p);
    n_ = cap_ = n;
#if defined(MADV_HUGEPAGE)
    // Weights are walked row by row across the whole buffer; 2 MiB pages spare the TLB misses of
    // 4 KiB ones (and the page faults of filling them). Only whole huge pages inside the buffer: no
    // byte beyond it becomes resident.
    if (n >= kHuge) madvise(p_, n / kHuge * kHuge, MADV_HUGEPAGE);  // a hint: failure is harmless
#endif
}

}  // namespace llm
