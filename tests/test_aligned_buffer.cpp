// The weight buffer: alignment for O_DIRECT and SIMD, capacity reuse, and 2 MiB pages for big
// buffers where the kernel offers them.
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "core/aligned_buffer.h"

using namespace llm;

#if defined(__linux__) && !defined(__SANITIZE_ADDRESS__) && !defined(LLM_TEST_EMULATED)
namespace {

// The smaps fields of the mapping that holds p (Linux): its VmFlags line and its AnonHugePages
// in kB (-1 if not found).
struct Smaps {
    std::string vm_flags;
    long anon_huge_kb = -1;
};

Smaps smaps_of(const void *p) {
    std::ifstream f("/proc/self/smaps");
    std::string line;
    bool inside = false;
    Smaps out;
    const auto a = reinterpret_cast<uintptr_t>(p);
    while (std::getline(f, line)) {
        unsigned long lo = 0, hi = 0;
        if (std::sscanf(line.c_str(), "%lx-%lx ", &lo, &hi) == 2 && line.find(':') > line.find(' ')) {
            inside = a >= lo && a < hi;
            continue;
        }
        if (!inside) continue;
        long kb = 0;
        if (std::sscanf(line.c_str(), "AnonHugePages: %ld kB", &kb) == 1) out.anon_huge_kb = kb;
        if (line.rfind("VmFlags:", 0) == 0) out.vm_flags = line.substr(8) + " ";
    }
    return out;
}

bool thp_offered() {
    std::ifstream f("/sys/kernel/mm/transparent_hugepage/enabled");
    std::string s;
    std::getline(f, s);
    return s.find("[always]") != std::string::npos || s.find("[madvise]") != std::string::npos;
}

}  // namespace
#endif

TEST_CASE("aligned buffer: page-aligned, keeps its memory when shrunk, 2 MiB-aligned when big", "[core]") {
    AlignedBuffer small(100);
    CHECK(reinterpret_cast<uintptr_t>(small.data()) % 4096 == 0);
    CHECK(small.size() == 100);
    AlignedBuffer big(9u << 20);
    CHECK(reinterpret_cast<uintptr_t>(big.data()) % (2u << 20) == 0);
    std::memset(big.data(), 1, big.size());
    uint8_t *const p = big.data();
    big.resize(3u << 20);
    CHECK(big.data() == p);
    CHECK(big.size() == (3u << 20));
    CHECK(big.capacity() == (9u << 20));
    big.clear();
    CHECK(big.data() == nullptr);
    CHECK(big.capacity() == 0);
}

#if defined(__linux__) && !defined(__SANITIZE_ADDRESS__) && !defined(LLM_TEST_EMULATED)
TEST_CASE("aligned buffer: a big buffer asks for huge pages, a small one does not", "[core]") {
    if (!thp_offered()) {
        WARN("transparent huge pages are off on this machine: nothing to check");
        return;
    }
    // The advice is what the library controls ("hg" in the mapping's VmFlags); whether the kernel
    // then finds free 2 MiB pages depends on fragmentation, so that is reported, not required.
    AlignedBuffer big(9u << 20);
    std::memset(big.data(), 1, big.size());
    const Smaps sm = smaps_of(big.data());
    INFO("VmFlags:" << sm.vm_flags);
    CHECK(sm.vm_flags.find(" hg ") != std::string::npos);
    if (sm.anon_huge_kb < 4 * 2048) WARN("only " << sm.anon_huge_kb << " kB of the buffer got huge pages");
    AlignedBuffer small(64u << 10);
    std::memset(small.data(), 1, small.size());
    CHECK(smaps_of(small.data()).vm_flags.find(" hg ") == std::string::npos);
}
#endif
