// SentencePiece-style tokenizer (tokenizer.ggml.model = "llama"): greedy merges by score over UTF-8
// characters, with <0xXX> byte tokens for anything the vocab cannot spell (TOKENIZERS.md §4.2, §6, §8).
#pragma once

#include <array>

#include "tokenizer/tokenizer.h"
#include "tokenizer/vocab.h"

namespace llm {

class SpmTokenizer final : public Tokenizer {
public:
    explicit SpmTokenizer(const Metadata &meta);

    std::string piece(int32_t id) const override;

    const std::string &token_text(int32_t id) const override { return vocab_.text(id); }
    int32_t n_vocab() const override { return vocab_.size(); }
    int32_t bos() const override { return vocab_.special().bos; }
    int32_t eos() const override { return vocab_.special().eos; }
    bool adds_bos() const override { return vocab_.add_bos(); }
    bool adds_eos() const override { return vocab_.add_eos(); }
    bool is_eog(int32_t id) const override { return vocab_.is_eog(id); }
    std::string model_name() const override { return "llama"; }

    const Vocab &vocab() const { return vocab_; }

protected:
    void encode_text(std::string_view text, bool parse_special, std::vector<int32_t> &out) const override;

private:
    // Runs the merge algorithm on one escaped text fragment (spaces already turned into U+2581).
    void encode_fragment(const std::string &text, std::vector<int32_t> &out) const;

    Vocab vocab_;
    std::array<int32_t, 256> byte_ids_{};  // byte -> <0xXX> token (or the 1-byte token), -1 if neither
};

}  // namespace llm
