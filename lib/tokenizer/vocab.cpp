#include "tokenizer/vocab.h"

#include <algorithm>
#include <cctype>
#include <initializer_list>

#include "core/error.h"
#include "core/log.h"

namespace llm {

namespace {

// tokenizer.ggml.token_type values (TOKENIZERS.md §3).
enum TokenType : int32_t {
    kTypeUndefined = 0,
    kTypeNormal = 1,
    kTypeUnknown = 2,
    kTypeControl = 3,
    kTypeUserDefined = 4,
    kTypeUnused = 5,
    kTypeByte = 6,
};

uint32_t attr_from_type(int32_t type, const std::string &text) {
    switch (type) {
    case kTypeNormal: return kAttrNormal;
    case kTypeUnknown: return kAttrUnknown;
    case kTypeUserDefined: return kAttrUserDefined;
    case kTypeUnused: return kAttrUnused;
    case kTypeByte: return kAttrByte;
    // Placeholder slots (Gemma's <unused42>) are typed CONTROL but must never match user text.
    case kTypeControl: return text.find("unused") != std::string::npos ? kAttrUnused : kAttrControl;
    default: return kAttrUndefined;
    }
}

// Converters do not always write these ids, so llama.cpp finds them by their well-known text; we do too,
// so that the same files stop generation at the same tokens.
struct TextRule {
    int32_t SpecialIds::*id;
    std::vector<const char *> texts;
};

const TextRule kTextRules[] = {
    {&SpecialIds::eot,
     {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>", "<EOT>", "_<EOT>",
      "[EOT]", "<｜end▁of▁sentence｜>", "<end_of_utterance>"}},
    {&SpecialIds::eom, {"<|eom_id|>"}},
    {&SpecialIds::fim_pre,
     {"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<｜fim▁begin｜>", "<PRE>", "▁<PRE>", "<|code_prefix|>",
      "<|prefix|>"}},
    {&SpecialIds::fim_suf,
     {"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<｜fim▁hole｜>", "<SUF>", "▁<SUF>", "<|code_suffix|>",
      "<|suffix|>"}},
    {&SpecialIds::fim_mid,
     {"<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<｜fim▁end｜>", "<MID>", "▁<MID>", "<|code_middle|>",
      "<|middle|>"}},
    {&SpecialIds::fim_pad, {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"}},
    {&SpecialIds::fim_rep, {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"}},
    {&SpecialIds::fim_sep, {"<|file_sep|>"}},
};

// Any of these ends generation, whatever the id keys say (llama.cpp's list at d32676d; two of them are
// taken out again in build_eog() for the vocabs that use them otherwise).
const char *const kEogTexts[] = {
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<|return|>",
    "<|call|>",
    "<|flush|>",
    "<|calls|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "</s>",
    "<|eom_id|>",
    "<EOT>",
    "_<EOT>",
    "[EOT]",
    "[EOS]",
    "<|end_of_text|>",
    "<end_of_utterance>",
    "<eos>",
    "<turn|>",
    "<|tool_response>",
    "<｜end▁of▁sentence｜>",
    "[e~[",
};

// gpt-oss's chat markup: always printed, and matched in user text like user-defined tokens.
const char *const kRenderedMarkup[] = {"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"};

struct IdKey {
    const char *key;
    int32_t SpecialIds::*id;
};

const IdKey kIdKeys[] = {
    {"tokenizer.ggml.bos_token_id", &SpecialIds::bos},
    {"tokenizer.ggml.eos_token_id", &SpecialIds::eos},
    {"tokenizer.ggml.eot_token_id", &SpecialIds::eot},
    {"tokenizer.ggml.eom_token_id", &SpecialIds::eom},
    {"tokenizer.ggml.unknown_token_id", &SpecialIds::unk},
    {"tokenizer.ggml.seperator_token_id", &SpecialIds::sep},  // sic, as written by the converters
    {"tokenizer.ggml.padding_token_id", &SpecialIds::pad},
    {"tokenizer.ggml.mask_token_id", &SpecialIds::mask},
    {"tokenizer.ggml.fim_pre_token_id", &SpecialIds::fim_pre},
    {"tokenizer.ggml.fim_suf_token_id", &SpecialIds::fim_suf},
    {"tokenizer.ggml.fim_mid_token_id", &SpecialIds::fim_mid},
    {"tokenizer.ggml.fim_pad_token_id", &SpecialIds::fim_pad},
    {"tokenizer.ggml.fim_rep_token_id", &SpecialIds::fim_rep},
    {"tokenizer.ggml.fim_sep_token_id", &SpecialIds::fim_sep},
    // Older files spell the FIM ids this way.
    {"tokenizer.ggml.prefix_token_id", &SpecialIds::fim_pre},
    {"tokenizer.ggml.suffix_token_id", &SpecialIds::fim_suf},
    {"tokenizer.ggml.middle_token_id", &SpecialIds::fim_mid},
};

bool is_c_space(char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; }

}  // namespace

Vocab Vocab::load(const Metadata &meta, const VocabDefaults &defaults) {
    Vocab v;
    v.read_tokens(meta);
    v.read_special_ids(meta, defaults);
    v.detect_by_text();
    v.build_eog();
    v.build_special_cache(meta);
    return v;
}

int32_t Vocab::find(const std::string &text) const {
    auto it = ids_.find(text);
    return it == ids_.end() ? -1 : it->second;
}

void Vocab::read_tokens(const Metadata &meta) {
    const std::vector<std::string> *tokens = meta.str_array("tokenizer.ggml.tokens");
    if (!tokens) fail(LLM_ERR_FORMAT, "required metadata key 'tokenizer.ggml.tokens' is missing");
    if (tokens->empty()) fail(LLM_ERR_FORMAT, "'tokenizer.ggml.tokens' is empty");
    if (tokens->size() > static_cast<size_t>(INT32_MAX)) {
        fail(LLM_ERR_FORMAT, "'tokenizer.ggml.tokens' has {} entries, more than token ids can address", tokens->size());
    }
    const size_t n = tokens->size();

    auto scores = meta.f32_array("tokenizer.ggml.scores");
    if (scores && scores->size() != n) {
        fail(LLM_ERR_FORMAT, "'tokenizer.ggml.scores' has {} entries, expected {}", scores->size(), n);
    }
    auto types = meta.i32_array("tokenizer.ggml.token_type");
    if (types && types->size() != n) {
        fail(LLM_ERR_FORMAT, "'tokenizer.ggml.token_type' has {} entries, expected {}", types->size(), n);
    }

    texts_ = *tokens;
    scores_ = scores ? std::move(*scores) : std::vector<float>(n, 0.0f);
    attrs_.resize(n);
    ids_.reserve(n);
    for (size_t i = 0; i < n; ++i) {
        auto id = static_cast<int32_t>(i);
        // An empty text could never be matched and would collide with other empties; give it a name.
        if (texts_[i].empty()) {
            log().warn("tokenizer: token {} has empty text", i);
            texts_[i] = fmt::format("[EMPTY_{}]", i);
        }
        attrs_[i] = types ? attr_from_type((*types)[i], texts_[i]) : kAttrNormal;
        auto [it, inserted] = ids_.emplace(texts_[i], id);
        if (!inserted) {
            fail(LLM_ERR_FORMAT, "'tokenizer.ggml.tokens' holds '{}' twice (ids {} and {})", texts_[i], it->second, id);
        }
    }
}

void Vocab::read_special_ids(const Metadata &meta, const VocabDefaults &defaults) {
    auto in_range = [&](int32_t id) { return valid(id) ? id : -1; };
    special_.bos = in_range(defaults.bos);
    special_.eos = in_range(defaults.eos);
    special_.unk = in_range(defaults.unk);

    for (const IdKey &k : kIdKeys) {
        std::optional<uint32_t> id = meta.u32(k.key);
        if (!id) continue;
        // Converters write 0xFFFFFFFF for "none" (worth no warning) or sometimes a stale id; either way
        // the family default stays.
        if (*id == UINT32_MAX) continue;
        if (*id >= static_cast<uint32_t>(size())) {
            log().warn("tokenizer: {} = {} is not a token id (n_vocab {}); keeping {}", k.key, *id, size(),
                       special_.*k.id);
            continue;
        }
        special_.*k.id = static_cast<int32_t>(*id);
    }

    add_bos_ = meta.boolean("tokenizer.ggml.add_bos_token").value_or(defaults.add_bos);
    add_eos_ = meta.boolean("tokenizer.ggml.add_eos_token").value_or(defaults.add_eos);
    add_space_prefix_ = meta.boolean("tokenizer.ggml.add_space_prefix").value_or(defaults.add_space_prefix);
}

void Vocab::detect_by_text() {
    for (const TextRule &rule : kTextRules) {
        if (special_.*rule.id >= 0) continue;
        // Lowest id wins when several texts exist, so the choice does not depend on hash order.
        int32_t best = -1;
        for (const char *t : rule.texts) {
            int32_t id = find(t);
            if (id >= 0 && (best < 0 || id < best)) best = id;
        }
        if (best < 0) continue;
        special_.*rule.id = best;
        // Added to what the file says, as llama.cpp does: a user-defined </s> that ends generation becomes
        // control too, and so is matched in text only with parse_special.
        if (!has_attr(best, kAttrControl)) {
            log().warn("tokenizer: token {} '{}' looks like a control token; treating it as one", best, texts_[best]);
            attrs_[best] |= kAttrControl;
        }
    }
}

void Vocab::build_eog() {
    for (int32_t id : {special_.fim_pad, special_.fim_rep, special_.fim_sep})
        if (id >= 0) eog_.insert(id);
    for (const char *t : kEogTexts) {
        int32_t id = find(t);
        if (id < 0) continue;
        eog_.insert(id);
        if (!has_attr(id, kAttrControl)) {
            log().warn("tokenizer: end-of-generation token {} '{}' was not typed control; treating it as one", id, t);
            attrs_[id] |= kAttrControl;
        }
    }
    for (const char *t : kRenderedMarkup)
        if (int32_t id = find(t); id >= 0) attrs_[id] = kAttrUserDefined;
    for (int32_t id : {special_.eos, special_.eot, special_.eom})
        if (id >= 0) eog_.insert(id);

    auto eog_text = [&](const char *t) {
        int32_t id = find(t);
        return id >= 0 && eog_.count(id) != 0 ? id : -1;
    };
    // Harmony (gpt-oss) and Solar Open end a message with <|end|> but the turn only with <|return|> /
    // <|call|> (<|calls|> / <|flush|>), so <|end|> must not stop generation there.
    const int32_t end = eog_text("<|end|>");
    const bool has_call = eog_text("<|call|>") >= 0 || eog_text("<|calls|>") >= 0;
    if (end >= 0 && has_call && (eog_text("<|return|>") >= 0 || eog_text("<|flush|>") >= 0)) {
        eog_.erase(end);
        attrs_[end] = kAttrUserDefined;
    }
    // Gemma 4 (recognised by <|tool_response>) uses </s> as ordinary text.
    const int32_t s_end = eog_text("</s>");
    if (s_end >= 0 && eog_text("<|tool_response>") >= 0) {
        eog_.erase(s_end);
        attrs_[s_end] = kAttrNormal;
    }
}

void Vocab::build_special_cache(const Metadata &meta) {
    for (int32_t id = 0; id < size(); ++id)
        if (has_attr(id, kAttrControl | kAttrUserDefined | kAttrUnknown)) special_cache_.push_back(id);
    // Longest first, so "<|end|>" cannot steal the prefix of a longer special token.
    std::stable_sort(special_cache_.begin(), special_cache_.end(),
                     [&](int32_t a, int32_t b) { return texts_[a].size() > texts_[b].size(); });

    // Phi-3's chat template puts a newline after every special token that HF's tokenizer swallows.
    std::string name = meta.str("general.name").value_or("");
    std::transform(name.begin(), name.end(), name.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    if (name.find("phi-3") != std::string::npos || name.find("phi3") != std::string::npos) {
        for (int32_t id : special_cache_) attrs_[id] |= kAttrRstrip;
        if (int32_t id = find("</s>"); id >= 0) attrs_[id] |= kAttrRstrip;
        for (const char *t : {"<unk>", "<s>", "<|endoftext|>"})
            if (int32_t id = find(t); id >= 0) attrs_[id] &= ~kAttrRstrip;
    }
}

std::vector<Fragment> Vocab::partition(std::string_view text, bool parse_special) const {
    std::vector<Fragment> frags;
    if (text.empty()) return frags;
    frags.push_back({-1, text});

    std::vector<Fragment> next;
    for (int32_t id : special_cache_) {
        if (!parse_special && has_attr(id, kAttrControl | kAttrUnknown)) continue;
        const std::string &tok = texts_[id];
        const bool lstrip = has_attr(id, kAttrLstrip), rstrip = has_attr(id, kAttrRstrip);

        next.clear();
        for (const Fragment &f : frags) {
            if (f.is_token()) {
                next.push_back(f);
                continue;
            }
            std::string_view rest = f.text;
            for (size_t at; (at = rest.find(tok)) != std::string_view::npos;) {
                std::string_view left = rest.substr(0, at);
                if (lstrip)
                    while (!left.empty() && is_c_space(left.back())) left.remove_suffix(1);
                if (!left.empty()) next.push_back({-1, left});
                next.push_back({id, {}});
                rest.remove_prefix(at + tok.size());
                if (rstrip)
                    while (!rest.empty() && is_c_space(rest.front())) rest.remove_prefix(1);
            }
            if (!rest.empty()) next.push_back({-1, rest});
        }
        frags.swap(next);
    }
    return frags;
}

}  // namespace llm
