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

// kB of transparent huge pages backing the mapping that holds p (Linux), or -1 if unknown.
long anon_huge_kb(const void *p) {
    std::ifstream f("/proc/self/smaps");
    std::string line;
    bool inside = false;
    const auto a = reinterpret_cast<uintptr_t>(p);
    while (std::getline(f, line)) {
        unsigned long lo = 0, hi = 0;
        if (std::sscanf(line.c_str(), "%lx-%lx ", &lo, &hi) == 2 && line.find(':') > line.find(' ')) {
            inside = a >= lo && a < hi;
            continue;
        }
        long kb = 0;
        if (inside && std::sscanf(line.c_str(), "AnonHugePages: %ld kB", &kb) == 1) return kb;
    }
    return -1;
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
TEST_CASE("aligned buffer: a big buffer is backed by huge pages when the kernel offers them", "[core]") {
    if (!thp_offered()) {
        WARN("transparent huge pages are off on this machine: nothing to check");
        return;
    }
    AlignedBuffer big(9u << 20);
    std::memset(big.data(), 1, big.size());
    const long kb = anon_huge_kb(big.data());
    INFO("AnonHugePages " << kb << " kB");
    // The four whole 2 MiB pages inside the buffer; the last MiB stays in small pages.
    CHECK(kb >= 4 * 2048);
}
#endif
