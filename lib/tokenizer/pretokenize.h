// BPE pre-tokenization (TOKENIZERS.md §5): which regex list and flags a tokenizer.ggml.pre value selects,
// and the splitter that cuts text into pre-tokens with those regexes (PCRE2, full Unicode properties).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace llm {

// What tokenizer.ggml.pre decides for a byte-level BPE vocab.
struct PreTokenizerConfig {
    std::string kind;                  // regex family for logs and tests: "default", "gpt2", "llama3", ...
    std::vector<std::string> regexes;  // applied in sequence, each re-splitting the previous pieces
    bool ignore_merges = false;        // a pre-token that is itself a vocab token skips the merges
    bool add_bos = false;              // default for tokenizer.ggml.add_bos_token
    bool clean_spaces = true;          // detokenizer drops the space HF puts before punctuation
    bool no_bos = false;               // no BOS id unless tokenizer.ggml.bos_token_id names one (GLM-4)
    // false (gemma4): no GPT-2 byte mapping. ' ' is written U+2581 and merges run over the raw UTF-8
    // characters; a pre-token that is a run of newlines and a token is taken whole; a final symbol
    // outside the vocab falls back to its bytes' <0xXX> tokens.
    bool byte_level = true;
};

// tokenizer.ggml.model = "gemma4" (llama.cpp forces this pre-tokenizer whatever tokenizer.ggml.pre says):
// runs of newlines and runs of anything else, not byte-level, BOS always added, spaces cleaned on decode.
PreTokenizerConfig gemma4_pre_tokenizer();

// Every byte-level value llama.cpp accepts is known. A missing value means "default" with a warning, as in
// llama.cpp. Throws Error(LLM_ERR_UNSUPPORTED) naming the value for anything else, llama.cpp's non-byte-level
// pre-tokenizers (gemma4, sarvam-moe, ...) included: a guessed pre-tokenizer would give wrong tokens.
PreTokenizerConfig pre_tokenizer_config(const std::optional<std::string> &pre);

// The accepted values, in table order (for tests and documentation).
std::vector<std::string> pre_tokenizer_names();

// Splits text with a list of regexes, "isolated": within a piece every match and every unmatched gap
// between matches becomes a piece, so the pieces always concatenate back to the input. Matching is
// PCRE2 in UTF + UCP mode (JIT-compiled when available); invalid UTF-8 never matches and so ends up in
// gap pieces. Thread-safe: split() keeps its match state on the stack.
class RegexSplitter {
public:
    // Throws Error(LLM_ERR_INTERNAL) if a pattern does not compile: the patterns are ours, not the file's.
    explicit RegexSplitter(const std::vector<std::string> &patterns);
    ~RegexSplitter();
    RegexSplitter(RegexSplitter &&) noexcept;
    RegexSplitter &operator=(RegexSplitter &&) noexcept;

    // The pieces borrow from `text`.
    std::vector<std::string_view> split(std::string_view text) const;

private:
    struct Regex;
    std::vector<std::unique_ptr<Regex>> regexes_;
};

}  // namespace llm
