// FNV-1a, 64-bit: the model fingerprint and the saved-session checksum. Not cryptographic: it guards
// against accidents (another model, a torn or flipped file), not against a forger.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace llm {

class Fnv1a64 {
public:
    void add(const void *data, size_t n) {
        const auto *p = static_cast<const uint8_t *>(data);
        uint64_t h = h_;
        for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
        h_ = h;
    }
    template <class T> void add_value(const T &v) { add(&v, sizeof v); }
    // Length first, so ("ab", "c") and ("a", "bc") differ.
    void add_string(std::string_view s) {
        add_value(static_cast<uint64_t>(s.size()));
        add(s.data(), s.size());
    }
    uint64_t value() const { return h_; }

private:
    uint64_t h_ = 1469598103934665603ull;
};

}  // namespace llm
