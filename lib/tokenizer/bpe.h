// Byte-level BPE tokenizer (tokenizer.ggml.model = "gpt2"): regex pre-tokenization, GPT-2's byte ->
// code point mapping, then merges by rank (TOKENIZERS.md §4.3, §5, §7, §8).
#pragma once

#include <array>
#include <string>
#include <unordered_map>

#include "tokenizer/pretokenize.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/vocab.h"

namespace llm {

class BpeTokenizer final : public Tokenizer {
public:
    // Throws Error(LLM_ERR_FORMAT) when tokenizer.ggml.merges is missing or malformed. gemma4: the
    // gemma4 model's tokenizer (gemma4_pre_tokenizer()) instead of the byte-level one.
    explicit BpeTokenizer(const Metadata &meta, bool gemma4 = false);

    // Raw bytes: a multi-byte character may be split across two pieces.
    std::string piece(int32_t id) const override;

    const std::string &token_text(int32_t id) const override { return vocab_.text(id); }
    int32_t n_vocab() const override { return vocab_.size(); }
    int32_t bos() const override { return vocab_.special().bos; }
    int32_t eos() const override { return vocab_.special().eos; }
    bool adds_bos() const override { return vocab_.add_bos(); }
    bool adds_eos() const override { return vocab_.add_eos(); }
    bool is_eog(int32_t id) const override { return vocab_.is_eog(id); }
    std::string model_name() const override { return pre_.byte_level ? "gpt2" : "gemma4"; }

    // The pieces joined, then (if the pre-tokenizer asks for it) HF's clean-up of the spaces its
    // tokenizers put before punctuation and English contractions (§8). For showing whole texts; streaming
    // output should concatenate piece() instead.
    std::string decode(const std::vector<int32_t> &ids) const;

    const Vocab &vocab() const { return vocab_; }
    const PreTokenizerConfig &pre() const { return pre_; }
    // Merge priority of "left right" (lower merges first), -1 if the pair never merges.
    int32_t rank(std::string_view left, std::string_view right) const;

protected:
    void encode_text(std::string_view text, bool parse_special, std::vector<int32_t> &out) const override;

private:
    void read_merges(const Metadata &meta);
    // One pre-token (raw bytes) -> ids.
    void encode_word(std::string_view word, std::vector<int32_t> &out) const;

    PreTokenizerConfig pre_;  // before vocab_: its add_bos is the vocab's default
    Vocab vocab_;
    RegexSplitter splitter_;
    std::unordered_map<std::string, int32_t> ranks_;  // "left right" -> merge index
    std::array<int32_t, 256> byte_ids_{};  // last-resort byte tokens ("\xNN", or "<0xNN>" when not byte-level), -1 if absent
};

}  // namespace llm
