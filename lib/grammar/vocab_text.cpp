#include "grammar/vocab_text.h"

#include "core/utf8.h"
#include "tokenizer/tokenizer.h"

namespace llm::grammar {

Utf8Split split_utf8(std::string_view s) {
    Utf8Split out;
    for (size_t i = 0; i < s.size();) {
        const unsigned char lead = static_cast<unsigned char>(s[i]);
        const size_t need = utf8::seq_len(lead);
        if (lead >= 0xC2 && lead <= 0xF4 && i + need > s.size()) {
            // An unfinished last sequence: valid only if every byte after the lead is a continuation.
            bool cont = true;
            for (size_t k = i + 1; k < s.size(); ++k) cont = cont && (static_cast<unsigned char>(s[k]) & 0xC0) == 0x80;
            if (cont) {
                out.tail.assign(s.substr(i));
            } else {
                out.valid = false;
            }
            return out;
        }
        uint32_t cp = 0;
        size_t len = 0;
        if (!utf8::decode_at(s, i, &cp, &len)) {
            out.valid = false;
            return out;
        }
        out.cps.push_back(cp);
        i += len;
    }
    return out;
}

void tail_range(std::string_view tail, uint32_t *lo, uint32_t *hi) {
    const unsigned char lead = static_cast<unsigned char>(tail[0]);
    const size_t need = utf8::seq_len(lead);
    // The bits known so far, then every value of the missing continuation bits.
    uint32_t v = lead & (need == 2 ? 0x1Fu : need == 3 ? 0x0Fu : 0x07u);
    for (size_t k = 1; k < tail.size(); ++k) v = (v << 6) | (static_cast<unsigned char>(tail[k]) & 0x3Fu);
    const size_t missing = need - tail.size();
    uint32_t a = v << (6 * missing), b = a | ((1u << (6 * missing)) - 1);
    // Shortest-form limits of each length (overlong forms and values past U+10FFFF never decode).
    const uint32_t min = need == 2 ? 0x80 : need == 3 ? 0x800 : 0x10000;
    const uint32_t max = need == 2 ? 0x7FF : need == 3 ? 0xFFFF : 0x10FFFF;
    *lo = a < min ? min : a;
    *hi = b > max ? max : b;
}

VocabText VocabText::build(const Tokenizer &tok) {
    VocabText v;
    const int32_t n = tok.n_vocab();
    v.tokens.resize(static_cast<size_t>(n));
    v.pieces.resize(static_cast<size_t>(n));
    for (int32_t id = 0; id < n; ++id) {
        Token &t = v.tokens[static_cast<size_t>(id)];
        t.eog = tok.is_eog(id);
        std::string &p = v.pieces[static_cast<size_t>(id)];
        p = tok.piece(id);
        Utf8Split s = split_utf8(p);
        t.valid = s.valid;
        t.cp_begin = static_cast<uint32_t>(v.cps.size());
        t.cp_count = static_cast<uint32_t>(s.cps.size());
        v.cps.insert(v.cps.end(), s.cps.begin(), s.cps.end());
        t.tail = std::move(s.tail);
    }
    return v;
}

}  // namespace llm::grammar
