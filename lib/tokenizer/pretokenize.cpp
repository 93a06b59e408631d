#include "tokenizer/pretokenize.h"

#include <algorithm>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "core/error.h"
#include "core/log.h"

namespace llm {

namespace {

// The regexes of TOKENIZERS.md §5.1, as PCRE2 patterns.
constexpr const char *kGpt2 =
    R"re('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))re";
// HF writes the contractions as (?i:'s|...); the explicit classes are the same thing.
constexpr const char *kLlama3 =
    R"re((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|)re"
    R"re( ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
// Llama 3's regex with single digits.
constexpr const char *kQwen2 =
    R"re((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|)re"
    R"re( ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
// Tekken splits camel case: an optional run of "upper" letters (letters other than a-z) then "lower" ones
// (letters other than A-Z), or the reverse. llama.cpp spells a letter-but-not-a-z as the group
// ((?=[\p{L}])([^a-z])); the class [^\P{L}a-z] matches the same characters, and as a single-character
// repeat it needs no backtracking stack on long runs of letters.
constexpr const char *kTekken =
    R"re([^\r\n\p{L}\p{N}]?[^\P{L}a-z]*[^\P{L}A-Z]+|[^\r\n\p{L}\p{N}]?[^\P{L}a-z]+[^\P{L}A-Z]*|\p{N}|)re"
    R"re( ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
constexpr const char *kDefaultPunct = R"re([\p{P}\$\+<=>\^~\|]+)re";

enum class Family { Default, Gpt2, Llama3, Qwen2, Tekken, Starcoder };

struct PreEntry {
    const char *pre;
    Family family;
    bool ignore_merges;
    bool add_bos;
    bool clean_spaces;
};

// Only the values our architectures meet, plus close relatives that share a regex (llama_vocab::load
// has the full list).
const PreEntry kPreTable[] = {
    {"default", Family::Default, false, false, true},
    {"llama3", Family::Llama3, true, true, true},
    {"llama-v3", Family::Llama3, true, true, true},
    {"llama-bpe", Family::Llama3, true, true, true},
    {"falcon3", Family::Llama3, true, true, true},
    {"pixtral", Family::Llama3, true, true, true},
    {"lfm2", Family::Llama3, true, true, true},
    {"dbrx", Family::Llama3, false, false, true},
    {"smaug-bpe", Family::Llama3, false, false, true},
    {"qwen2", Family::Qwen2, false, false, false},
    {"deepseek-r1-qwen", Family::Qwen2, false, false, false},
    {"kormo", Family::Qwen2, false, false, false},
    {"f2llmv2", Family::Qwen2, false, false, false},
    {"megrez", Family::Qwen2, false, false, true},
    {"gpt-2", Family::Gpt2, false, false, true},
    {"phi-2", Family::Gpt2, false, false, true},
    {"gigachat", Family::Gpt2, false, false, true},
    {"mellum", Family::Gpt2, false, false, true},
    {"jina-v1-en", Family::Gpt2, false, false, true},
    {"jina-v2-es", Family::Gpt2, false, false, true},
    {"jina-v2-de", Family::Gpt2, false, false, true},
    {"jina-v2-code", Family::Gpt2, false, false, true},
    {"tekken", Family::Tekken, true, true, false},
    {"starcoder", Family::Starcoder, false, false, true},
    {"refact", Family::Starcoder, false, false, true},
    {"smollm", Family::Starcoder, false, false, false},
    {"command-r", Family::Starcoder, false, false, false},
};

PreTokenizerConfig config_for(Family family) {
    PreTokenizerConfig c;
    switch (family) {
    case Family::Default:
        c.kind = "default";
        c.regexes = {kDefaultPunct, kGpt2, R"re(\p{N}+)re", "[0-9][0-9][0-9]"};
        break;
    case Family::Gpt2: c.kind = "gpt2"; c.regexes = {kGpt2}; break;
    case Family::Llama3: c.kind = "llama3"; c.regexes = {kLlama3}; break;
    case Family::Qwen2: c.kind = "qwen2"; c.regexes = {kQwen2}; break;
    case Family::Tekken: c.kind = "tekken"; c.regexes = {kTekken}; break;
    case Family::Starcoder: c.kind = "starcoder"; c.regexes = {R"re(\p{N})re", kGpt2}; break;
    }
    return c;
}

// Bytes in the UTF-8 sequence a lead byte announces; anything malformed counts as one.
size_t utf8_len(unsigned char lead) {
    static const uint8_t kLen[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    return kLen[lead >> 4];
}

std::string pcre2_message(int code) {
    PCRE2_UCHAR buf[256];
    if (pcre2_get_error_message(code, buf, sizeof buf) < 0) return "error " + std::to_string(code);
    return reinterpret_cast<const char *>(buf);
}

struct MatchDataDeleter {
    void operator()(pcre2_match_data *m) const { pcre2_match_data_free(m); }
};

}  // namespace

PreTokenizerConfig pre_tokenizer_config(const std::optional<std::string> &pre) {
    if (!pre) {
        log().warn("tokenizer: tokenizer.ggml.pre is missing; using the default pre-tokenizer");
        return config_for(Family::Default);
    }
    for (const PreEntry &e : kPreTable) {
        if (*pre != e.pre) continue;
        PreTokenizerConfig c = config_for(e.family);
        c.ignore_merges = e.ignore_merges;
        c.add_bos = e.add_bos;
        c.clean_spaces = e.clean_spaces;
        return c;
    }
    log().warn("tokenizer: unknown tokenizer.ggml.pre '{}'; using the default pre-tokenizer, tokens may "
               "differ from the model's training", *pre);
    return config_for(Family::Default);
}

struct RegexSplitter::Regex {
    pcre2_code *code = nullptr;
    ~Regex() { pcre2_code_free(code); }

    // Appends to `out` the pieces of `piece`: matches and the gaps between them.
    void split(std::string_view piece, pcre2_match_data *md, std::vector<std::string_view> &out) const {
        auto subject = reinterpret_cast<PCRE2_SPTR>(piece.data());
        size_t gap = 0, pos = 0;
        while (pos < piece.size()) {
            int rc = pcre2_match(code, subject, piece.size(), pos, 0, md, nullptr);
            // The JIT stack is small and fixed; the interpreter keeps its backtracking state on the heap.
            if (rc < 0 && rc != PCRE2_ERROR_NOMATCH)
                rc = pcre2_match(code, subject, piece.size(), pos, PCRE2_NO_JIT, md, nullptr);
            if (rc == PCRE2_ERROR_NOMATCH) break;
            if (rc < 0) fail(LLM_ERR_INTERNAL, "pre-tokenizer regex failed: {}", pcre2_message(rc));
            const PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
            const size_t start = ov[0], end = ov[1];
            if (end == start) {
                // None of our patterns matches empty, but stepping past one keeps the loop finite.
                pos = std::min(piece.size(), start + utf8_len(static_cast<unsigned char>(piece[start])));
                continue;
            }
            if (start > gap) out.push_back(piece.substr(gap, start - gap));
            out.push_back(piece.substr(start, end - start));
            gap = pos = end;
        }
        if (gap < piece.size()) out.push_back(piece.substr(gap));
    }
};

RegexSplitter::RegexSplitter(const std::vector<std::string> &patterns) {
    uint32_t jit_ok = 0;
    pcre2_config(PCRE2_CONFIG_JIT, &jit_ok);
    for (const std::string &p : patterns) {
        int err = 0;
        PCRE2_SIZE err_off = 0;
        auto r = std::make_unique<Regex>();
        // MATCH_INVALID_UTF: user text may hold broken UTF-8, which must split, not throw.
        r->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(p.data()), p.size(),
                                PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &err, &err_off, nullptr);
        if (!r->code) {
            fail(LLM_ERR_INTERNAL, "pre-tokenizer regex '{}' does not compile at offset {}: {}", p, err_off,
                 pcre2_message(err));
        }
        // Without JIT (an unsupported CPU, or a build without it) the interpreter gives the same answers.
        if (jit_ok) pcre2_jit_compile(r->code, PCRE2_JIT_COMPLETE);
        regexes_.push_back(std::move(r));
    }
}

RegexSplitter::~RegexSplitter() = default;
RegexSplitter::RegexSplitter(RegexSplitter &&) noexcept = default;
RegexSplitter &RegexSplitter::operator=(RegexSplitter &&) noexcept = default;

std::vector<std::string_view> RegexSplitter::split(std::string_view text) const {
    std::vector<std::string_view> pieces;
    if (text.empty()) return pieces;
    pieces.push_back(text);
    std::unique_ptr<pcre2_match_data, MatchDataDeleter> md(pcre2_match_data_create(1, nullptr));
    if (!md) fail(LLM_ERR_OUT_OF_MEMORY, "pre-tokenizer: cannot allocate PCRE2 match data");

    std::vector<std::string_view> next;
    for (const auto &re : regexes_) {
        next.clear();
        for (std::string_view piece : pieces) re->split(piece, md.get(), next);
        pieces.swap(next);
    }
    return pieces;
}

}  // namespace llm
