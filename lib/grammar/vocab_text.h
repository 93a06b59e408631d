// A vocabulary as the grammar sampler reads it, computed once per model (Model::grammar_vocab()):
// each token's printed bytes decoded into code points up front, so checking a token against a grammar
// decodes nothing. A token may end inside a UTF-8 sequence (byte-level vocabularies, <0xXX> tokens);
// those bytes are its tail, which the next token completes.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace llm {
class Tokenizer;
}

namespace llm::grammar {

// Text split into whole code points and an incomplete UTF-8 sequence at its end.
struct Utf8Split {
    std::vector<uint32_t> cps;
    std::string tail;      // the lead byte and continuation bytes of an unfinished sequence (may be empty)
    bool valid = true;     // false: malformed UTF-8 other than an unfinished last sequence
};
Utf8Split split_utf8(std::string_view bytes);
// The code points an unfinished sequence (Utf8Split::tail, non-empty) may still become: [*lo, *hi].
void tail_range(std::string_view tail, uint32_t *lo, uint32_t *hi);

struct VocabText {
    struct Token {
        uint32_t cp_begin = 0, cp_count = 0;  // its code points: cps[cp_begin, cp_begin + cp_count)
        std::string tail;
        bool valid = true;  // its bytes alone are well-formed UTF-8 (but for the tail)
        bool eog = false;
    };
    std::vector<uint32_t> cps;
    std::vector<Token> tokens;
    std::vector<std::string> pieces;  // the printed bytes, for decoding after another token's tail

    static VocabText build(const Tokenizer &tok);
};

}  // namespace llm::grammar
