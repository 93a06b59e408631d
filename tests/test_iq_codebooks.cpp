// The IQ codebooks (lib/kernels/iq_codebooks.cpp) as expanded from their compact form, against
// llama.cpp's own tables: the FNV-1a 64 hash of each table's bytes (little-endian, as in memory) and a
// few entries. The hashes were computed once by a throwaway C program that #included the tables of
// ggml/src/ggml-common.h at the goldens' llama.cpp commit and hashed sizeof(table) bytes.
#include <catch2/catch.hpp>

#include <cstring>

#include "kernels/iq_codebooks.h"

using namespace llm;

namespace {

template <typename A>
uint64_t fnv1a(const A &table) {
    unsigned char bytes[sizeof(table)];
    std::memcpy(bytes, table.data(), sizeof(table));  // host order = x86/arm little-endian, as hashed
    uint64_t h = 1469598103934665603ull;
    for (unsigned char b : bytes) h = (h ^ b) * 1099511628211ull;
    return h;
}

}  // namespace

TEST_CASE("IQ grids hash to llama.cpp's tables", "[kernels]") {
    CHECK(fnv1a(kIQ2XXSGrid) == 0x5bd45ef8a547a7e8ull);
    CHECK(fnv1a(kIQ2XSGrid) == 0xa3e52388268ca2a3ull);
    CHECK(fnv1a(kIQ2SGrid) == 0xcdb5ae5bcfe7fb32ull);
    CHECK(fnv1a(kIQ1SGrid) == 0x31aaba1fc89a41d0ull);
    CHECK(fnv1a(kIQ3XXSGrid) == 0x2748ed45beb63233ull);
    CHECK(fnv1a(kIQ3SGrid) == 0x5f1781aa06d14fbfull);
    CHECK(fnv1a(kIQSigns) == 0x100b4e510a867c83ull);
}

TEST_CASE("IQ grids: known entries", "[kernels]") {
    CHECK(kIQ2XXSGrid[0] == 0x0808080808080808ull);
    CHECK(kIQ2XXSGrid[255] == 0x2b2b2b1908081908ull);
    CHECK(kIQ2XSGrid[511] == 0x2b2b2b2b2b2b2b2bull);
    CHECK(kIQ2SGrid[1023] == 0x2b2b2b2b2b2b2b2bull);
    CHECK(kIQ1SGrid[0] == 0xffffffffffffffffull);
    CHECK(kIQ1SGrid[2047] == 0x0101010101010101ull);
    CHECK(kIQ3XXSGrid[255] == 0x3e341c04u);
    CHECK(kIQ3SGrid[511] == 0x0f0f0101u);
    // Sign entries: 7 stored bits plus the parity bit.
    CHECK(kIQSigns[0] == 0);
    CHECK(kIQSigns[1] == 129);
    CHECK(kIQSigns[3] == 3);
    CHECK(kIQSigns[127] == 255);
}
