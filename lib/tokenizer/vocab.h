// The vocabulary part of tokenizer.ggml.* shared by every tokenizer family: token texts, scores,
// attributes, special ids, the add_* flags, the end-of-generation set, and the split of input text
// around special tokens. The family (SPM, BPE) only supplies its defaults and its merge algorithm.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "gguf/metadata.h"

namespace llm {

// Attribute bits, derived from tokenizer.ggml.token_type plus a few hard-coded rules (TOKENIZERS.md §3).
enum TokenAttr : uint32_t {
    kAttrUndefined = 0,
    kAttrUnknown = 1u << 0,
    kAttrUnused = 1u << 1,
    kAttrNormal = 1u << 2,
    kAttrControl = 1u << 3,
    kAttrUserDefined = 1u << 4,
    kAttrByte = 1u << 5,
    kAttrLstrip = 1u << 6,  // swallow whitespace before the token
    kAttrRstrip = 1u << 7,  // swallow whitespace after the token
};

// What a family assumes when the GGUF does not say (TOKENIZERS.md §2). -1 = no such token.
struct VocabDefaults {
    int32_t bos = -1;
    int32_t eos = -1;
    int32_t unk = -1;
    bool add_bos = false;
    bool add_eos = false;
    bool add_space_prefix = false;
};

// Special ids; -1 when the vocab has none.
struct SpecialIds {
    int32_t bos = -1, eos = -1, eot = -1, eom = -1, unk = -1, sep = -1, pad = -1, mask = -1;
    int32_t fim_pre = -1, fim_suf = -1, fim_mid = -1, fim_pad = -1, fim_rep = -1, fim_sep = -1;
};

// A piece of input after special-token partitioning: either a special token (id >= 0) or raw text.
struct Fragment {
    int32_t id = -1;
    std::string_view text;  // points into the caller's input; empty for tokens
    bool is_token() const { return id >= 0; }
};

class Vocab {
public:
    // Throws Error(LLM_ERR_FORMAT) for missing/mismatched arrays or duplicate token texts.
    static Vocab load(const Metadata &meta, const VocabDefaults &defaults);

    int32_t size() const { return static_cast<int32_t>(texts_.size()); }
    bool valid(int32_t id) const { return id >= 0 && id < size(); }
    const std::string &text(int32_t id) const { return texts_[id]; }
    float score(int32_t id) const { return scores_[id]; }
    uint32_t attr(int32_t id) const { return attrs_[id]; }
    bool has_attr(int32_t id, uint32_t bits) const { return (attrs_[id] & bits) != 0; }
    int32_t find(const std::string &text) const;  // -1 if not a token

    const SpecialIds &special() const { return special_; }
    bool add_bos() const { return add_bos_; }
    bool add_eos() const { return add_eos_; }
    bool add_space_prefix() const { return add_space_prefix_; }
    // Families whose BOS llama.cpp adds whatever tokenizer.ggml.add_bos_token says (gemma4).
    void force_add_bos() { add_bos_ = true; }
    bool is_eog(int32_t id) const { return eog_.count(id) != 0; }
    // Special-token candidates for partition(), longest text first.
    const std::vector<int32_t> &special_tokens() const { return special_cache_; }

    // Splits text at special tokens (TOKENIZERS.md §4.1). User-defined tokens always match; control and
    // unknown ones only with parse_special. The fragments borrow from `text`.
    std::vector<Fragment> partition(std::string_view text, bool parse_special) const;

private:
    void read_tokens(const Metadata &meta);
    void read_special_ids(const Metadata &meta, const VocabDefaults &defaults);
    void detect_by_text();
    void build_eog();
    void build_special_cache(const Metadata &meta);

    std::vector<std::string> texts_;
    std::vector<float> scores_;
    std::vector<uint32_t> attrs_;
    std::unordered_map<std::string, int32_t> ids_;
    SpecialIds special_;
    bool add_bos_ = false;
    bool add_eos_ = false;
    bool add_space_prefix_ = false;
    std::unordered_set<int32_t> eog_;
    std::vector<int32_t> special_cache_;
};

}  // namespace llm
