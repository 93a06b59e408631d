// Text <-> token ids from the tokenizer stored in GGUF metadata (tokenizer.ggml.*).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/metadata.h"

namespace llm {

class Tokenizer {
public:
    virtual ~Tokenizer() = default;

    // Builds the tokenizer named by tokenizer.ggml.model. Throws Error: LLM_ERR_FORMAT for malformed
    // vocab metadata, LLM_ERR_UNSUPPORTED for tokenizer families we do not implement.
    static std::unique_ptr<Tokenizer> from_metadata(const Metadata &meta);

    // add_bos plays llama.cpp's add_special: BOS first (and EOS last, for vocabs that add one) when the
    // vocab says so (tokenizer.ggml.add_bos_token / family default). parse_special: match control-token
    // text (user-defined tokens are always matched). Never two BOS: a text whose own first token is BOS
    // (a chat template's {{ bos_token }} with parse_special) gets no second one.
    std::vector<int32_t> encode(std::string_view text, bool add_bos, bool parse_special) const;
    // The bytes a generated token prints as (control/unknown tokens: ""; SPM '▁' -> ' '; <0xXX> -> byte).
    virtual std::string piece(int32_t id) const = 0;

    // The token's text as the vocabulary stores it ("<s>", "<|im_end|>", "▁the"): what a chat template's
    // bos_token and eos_token are. id must be in [0, n_vocab).
    virtual const std::string &token_text(int32_t id) const = 0;

    virtual int32_t n_vocab() const = 0;
    virtual int32_t bos() const = 0;  // -1 if none
    virtual int32_t eos() const = 0;  // -1 if none
    virtual bool adds_bos() const = 0;
    virtual bool adds_eos() const = 0;
    virtual bool is_eog(int32_t id) const = 0;
    virtual std::string model_name() const = 0;  // "llama" (SPM), "gpt2" (BPE), ...

protected:
    // The text's own tokens, appended to out (encode() adds BOS and EOS around them).
    virtual void encode_text(std::string_view text, bool parse_special, std::vector<int32_t> &out) const = 0;
};

}  // namespace llm
