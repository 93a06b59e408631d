// Tables keyed by an enum: each row names its key, and a compile-time check proves that row i holds
// key i, so a reordered enum or a missing row fails the build instead of silently shifting every
// row after it (a table that lines up only by position misnames things without a sound).
#pragma once

#include <cstddef>
#include <iterator>

namespace llm {

// True when table[i].key == i for every row and the table has exactly `count` rows.
template <typename Row, size_t N>
constexpr bool rows_match_keys(const Row (&table)[N], size_t count) {
    if (N != count) return false;
    for (size_t i = 0; i < N; ++i)
        if (static_cast<size_t>(table[i].key) != i) return false;
    return true;
}

}  // namespace llm
