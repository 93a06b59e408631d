#include "tokenizer/pretokenize.h"

#include <algorithm>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "core/error.h"
#include "core/utf8.h"
#include "core/log.h"

namespace llm {

namespace {

// The regex lists of llama_vocab's pre-tokenizer types (TOKENIZERS.md §5.1), as PCRE2 patterns. llama.cpp
// runs a few of them through hand-written splitters and the rest through std::regex on a "collapsed" text
// (one byte per non-ASCII code point standing for its category); where that changes what a pattern means,
// the PCRE2 spelling below follows what llama.cpp computes, not the tokenizer.json original, and says so.

// English contractions, either case (HF's (?i:'s|'t|'re|'ve|'m|'ll|'d)).
#define LLM_CONTRACTIONS "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"

constexpr const char *kGpt2 = R"re('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))re";
constexpr const char *kLlama3 =
    LLM_CONTRACTIONS R"re(|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
// Llama 3's regex with single digits.
constexpr const char *kQwen2 =
    LLM_CONTRACTIONS R"re(|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
// Qwen2's with combining marks inside words.
constexpr const char *kQwen35 = LLM_CONTRACTIONS
    R"re(|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
// Llama 3's, but a whitespace run splits into power-of-two chunks.
constexpr const char *kJais2 = LLM_CONTRACTIONS
    R"re(|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s{512}(?!\S)|\s{256}(?!\S))re"
    R"re(|\s{128}(?!\S)|\s{64}(?!\S)|\s{32}(?!\S)|\s{16}(?!\S)|\s{8}(?!\S)|\s{4}(?!\S)|\s{1,2}(?!\S)|\s{1})re";
// Tekken splits camel case: an optional run of "upper" letters (letters other than a-z) then "lower" ones
// (letters other than A-Z), or the reverse. llama.cpp spells a letter-but-not-a-z as the group
// ((?=[\p{L}])([^a-z])); the class [^\P{L}a-z] matches the same characters, and as a single-character
// repeat it needs no backtracking stack on long runs of letters.
constexpr const char *kTekken =
    R"re([^\r\n\p{L}\p{N}]?[^\P{L}a-z]*[^\P{L}A-Z]+|[^\r\n\p{L}\p{N}]?[^\P{L}a-z]+[^\P{L}A-Z]*|\p{N}|)re"
    R"re( ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
// o200k (GPT-4o, Llama 4): Tekken's camel-case words with a contraction attached, digit triples.
constexpr const char *kGpt4o = R"re([^\r\n\p{L}\p{N}]?[^\P{L}a-z]*[^\P{L}A-Z]+)re" LLM_CONTRACTIONS
                               R"re(?|[^\r\n\p{L}\p{N}]?[^\P{L}a-z]+[^\P{L}A-Z]*)re" LLM_CONTRACTIONS
                               R"re(?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
// GPT-4o's with marks counted as letters (a mark is neither a-z nor A-Z, so it is both "upper" and "lower").
#define LLM_LM_NOT_LOWER "(?:(?=[\\p{L}\\p{M}])[^a-z])"
#define LLM_LM_NOT_UPPER "(?:(?=[\\p{L}\\p{M}])[^A-Z])"
constexpr const char *kGraniteEmbMulti =
    R"re([^\r\n\p{L}\p{N}]?)re" LLM_LM_NOT_LOWER "*" LLM_LM_NOT_UPPER "+" LLM_CONTRACTIONS
    R"re(?|[^\r\n\p{L}\p{N}]?)re" LLM_LM_NOT_LOWER "+" LLM_LM_NOT_UPPER "*" LLM_CONTRACTIONS
    R"re(?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
// The original splits upper/lower case like GPT-4o's, but llama.cpp's collapsed text gives every letter
// one category, so \p{Lu} and \p{Ll} both mean "any letter" and words never split at case changes.
constexpr const char *kCasefreeWords = R"re([^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+)re" LLM_CONTRACTIONS
                                       R"re(?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
constexpr const char *kYoutuWords = R"re([^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+)re" LLM_CONTRACTIONS
                                    R"re(?|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
constexpr const char *kYoutuCjk =
    R"re([\x{AC00}-\x{D7A3}\x{3131}-\x{318E}]+)re"
    R"re(|[\x{FF01}\x{2026}\x{201C}\x{201D}\x{2018}\x{2019}\x{2014}\x{FF1A}\x{FF1B}\x{FF0C})re"
    R"re(\x{3001}-\x{303F}\x{FE30}-\x{FE4F}]+)re"
    R"re(|[\x{3105}-\x{312F}]+|[\x{4E00}-\x{9FA5}\x{3040}-\x{309F}\x{30A0}-\x{30FF}]+)re";
// In llama.cpp's collapsed text the ASCII symbols of \p{S} are $+<=>^`| but not '~', which stays outside
// both \p{P} and \p{S}; these spell [\p{P}\p{S}] and its complement that way.
#define LLM_PS "(?:[\\p{P}\\p{S}](?<!~))"
#define LLM_NOT_LPS "(?:~|[^\\r\\n\\p{L}\\p{P}\\p{S}])"
// DeepSeek V3: ASCII punctuation glued to a following ASCII word, words with marks, symbol runs.
constexpr const char *kDeepseek3Words = R"re([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|)re" LLM_NOT_LPS
                                        "?"
                                        R"re([\p{L}\p{M}]+| ?)re" LLM_PS R"re(+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
constexpr const char *kDeepseek3Cjk = R"re([\x{4E00}-\x{9FA5}\x{3040}-\x{309F}\x{30A0}-\x{30FF}]+)re";
// DeepSeek LLM: an explicit list of cased-script letters, ASCII and full-width punctuation, CJK/Hangul.
constexpr const char *kDeepseekLlmLetters =
    R"re(\s?[A-Za-z\x{B5}\x{C0}-\x{D6}\x{D8}-\x{F6}\x{F8}-\x{1BA}\x{1BC}-\x{1BF}\x{1C4}-\x{293}\x{295}-\x{2AF})re"
    R"re(\x{370}-\x{373}\x{376}\x{377}\x{37B}-\x{37D}\x{37F}\x{386}\x{388}-\x{38A}\x{38C}\x{38E}-\x{3A1})re"
    R"re(\x{3A3}-\x{3F5}\x{3F7}-\x{481}\x{48A}-\x{52F}\x{531}-\x{556}\x{10A0}-\x{10C5}\x{13A0}-\x{13F5})re"
    R"re(\x{13F8}-\x{13FD}\x{1C90}-\x{1CBA}\x{1CBD}-\x{1CBF}\x{1D00}-\x{1D2B}\x{1D6B}-\x{1D77}\x{1D79}-\x{1D9A})re"
    R"re(\x{1E00}-\x{1F15}\x{1F18}-\x{1F1D}\x{1F20}-\x{1F45}\x{1F48}-\x{1F4D}\x{1F50}-\x{1F57}\x{1F59}\x{1F5B})re"
    R"re(\x{1F5D}\x{1F5F}-\x{1F7D}\x{1F80}-\x{1FB4}\x{1FB6}-\x{1FBC}\x{1FBE}\x{1FC2}-\x{1FC4}\x{1FC6}-\x{1FCC})re"
    R"re(\x{1FD0}-\x{1FD3}\x{1FD6}-\x{1FDB}\x{1FE0}-\x{1FEC}\x{1FF2}-\x{1FF4}\x{1FF6}-\x{1FFC}\x{2102}\x{2107})re"
    R"re(\x{210A}-\x{2113}\x{2115}\x{2119}-\x{211D}\x{2124}\x{2126}\x{2128}\x{212A}-\x{212D}\x{212F}-\x{2134})re"
    R"re(\x{2139}\x{213C}-\x{213F}\x{2145}-\x{2149}\x{214E}\x{2183}\x{2184}\x{2C00}-\x{2C7B}\x{2C7E}-\x{2CE4})re"
    R"re(\x{2CEB}-\x{2CEE}\x{2CF2}\x{2CF3}\x{A640}-\x{A66D}\x{A680}-\x{A69B}\x{A722}-\x{A76F}\x{A771}-\x{A787})re"
    R"re(\x{A78B}-\x{A78E}\x{AB70}-\x{ABBF}\x{FB00}-\x{FB06}\x{FB13}-\x{FB17}\x{FF21}-\x{FF3A}\x{FF41}-\x{FF5A})re"
    R"re(\x{10400}-\x{1044F}\x{104B0}-\x{104D3}\x{104D8}-\x{104FB}\x{10C80}-\x{10CB2}\x{10CC0}-\x{10CF2})re"
    R"re(\x{118A0}-\x{118DF}\x{1E900}-\x{1E943}]+)re";
constexpr const char *kDeepseekLlmPunct =
    R"re(\s?[!-/:-~\x{FF01}-\x{FF0F}\x{FF1A}-\x{FF5E}\x{2018}-\x{201F}\x{3000}-\x{3002}]+)re";
// std::regex's '$' is the end of the piece only; PCRE2's would also match before a final newline.
constexpr const char *kTrailingSpace = R"re(\s+\z)re";
// U+0800..U+4E00 is the range as written upstream; it covers most non-Latin scripts, not only CJK.
constexpr const char *kDeepseekCjk = R"re([\x{4E00}-\x{9FA5}\x{800}-\x{4E00}\x{AC00}-\x{D7FF}]+)re";
// Kimi K2: Han runs first; other letters never split at case changes (llama.cpp's splitter treats every
// letter alike). Han is the CJK ideograph blocks llama.cpp lists, not the Unicode script.
#define LLM_HAN_RANGES                                                                                      \
    "\\x{4E00}-\\x{9FFF}\\x{3400}-\\x{4DBF}\\x{20000}-\\x{2A6DF}\\x{2A700}-\\x{2B73F}\\x{2B740}-\\x{2B81F}" \
    "\\x{2B820}-\\x{2CEAF}\\x{2CEB0}-\\x{2EBEF}\\x{F900}-\\x{FAFF}\\x{2F800}-\\x{2FA1F}"
// Non-Han letters are spelled "not a non-letter, not Han": one class, so long words need no group frames.
constexpr const char *kKimiK2 =
    "[" LLM_HAN_RANGES "]+|[^\\r\\n\\p{L}\\p{N}]?[^\\P{L}" LLM_HAN_RANGES "]+" LLM_CONTRACTIONS
    R"re(?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
// Digit runs in groups of three counted from the right ("1234567" -> 1|234|567). llama.cpp's splitter
// also glues the text since the previous cut onto the first group ("ab1234" -> "ab1"|"234"), which the
// next regex usually, but not always, splits again. Only the first group of a run looks ahead to the
// run's end (the rest follow it three by three), and \G anchors every match where the last one ended,
// so a long run costs linear time.
constexpr const char *kDigitGroupsGlued = R"re(\G(?<=\p{N})\p{N}{3}|\G\P{N}*\p{N}{1,3}(?=(?:\p{N}{3})*(?!\p{N})))re";
// SuperBPE cuts before every ASCII digit triple counted from the run's right end (llama.cpp's
// (?=(\d{3})+(?!\d)), an empty match, through std::wregex whose \d is 0-9). The cuts are the same as
// isolating the triples, which keeps it linear as above.
constexpr const char *kDigitTriplesFromRight = R"re(\G(?<=[0-9])[0-9]{3}|[0-9]{3}(?=(?:[0-9]{3})*(?![0-9])))re";
constexpr const char *kAfmoeCjk =
    R"re([\x{4E00}-\x{9FFF}\x{3400}-\x{4DBF}\x{8C48}-\x{FAFF}\x{3040}-\x{309F}\x{30A0}-\x{30FF}\x{FF65}-\x{FF9F})re"
    R"re(\x{2F00}-\x{2FDF}\x{E40}-\x{E7F}\x{E80}-\x{EFF}\x{1780}-\x{17FF}\x{1000}-\x{109F}\x{AA60}-\x{AA7F})re"
    R"re(\x{A9E0}-\x{A9FF}\x{AC00}-\x{D7AF}\x{1100}-\x{11FF}]+)re";
// BLOOM / Poro: the class is literally "not whitespace, '(', '|', ')' or the listed punctuation".
constexpr const char *kBloom = R"re( ?[^(\s|.,!?\x{2026}\x{3002}\x{FF0C}\x{3001}\x{964}\x{6D4}\x{60C})]+)re";
constexpr const char *kBailing =
    R"re('(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*)re"
    R"re(|\s*[\r\n]|\s+(?!\S)|\s+)re";
constexpr const char *kSeedCoder =
    LLM_CONTRACTIONS R"re(|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1}| ?[^\s\p{L}\p{N}\r\n]+|\s*[\r\n]+|\s+(?!\S)|\s+)re";
constexpr const char *kExaoneMoe = LLM_CONTRACTIONS
    R"re(|[^\r\n\p{L}\p{N}]?(?:\p{L}\p{M}*(?: \p{L}\p{M}*)*)+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]?|\s*[\r\n])re"
    R"re(|\s+(?!\S)|\s+)re";
constexpr const char *kMinicpm5 =
    LLM_CONTRACTIONS R"re(|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}+| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
constexpr const char *kDefaultPunct = R"re([\p{P}\$\+<=>\^~\|]+)re";

enum class Family {
    Default,
    Gpt2,
    Llama3,
    Qwen2,
    Qwen35,
    Tekken,
    Starcoder,
    Falcon,
    DeepseekLlm,
    DeepseekCoder,
    Deepseek3,
    Youtu,
    Jais2,
    Bloom,
    Viking,
    Chameleon,
    Gpt4o,
    GraniteEmbMulti,
    TinyAya,
    KimiK2,
    SuperBpe,
    Bailing,
    SeedCoder,
    Afmoe,
    Laguna,
    ExaoneMoe,
    Minicpm5,
};

enum PreFlag : unsigned {
    kIgnoreMerges = 1u << 0,
    kAddBos = 1u << 1,
    kKeepSpaces = 1u << 2,  // clean_spaces = false
    kNoBos = 1u << 3,       // no BOS id unless the file names one
};

struct PreEntry {
    const char *pre;
    Family family;
    unsigned flags;
};

// Every value llama_vocab::impl::load accepts for a byte-level BPE vocab, with its flags.
const PreEntry kPreTable[] = {
    {"default", Family::Default, 0},
    {"llama3", Family::Llama3, kIgnoreMerges | kAddBos},
    {"llama-v3", Family::Llama3, kIgnoreMerges | kAddBos},
    {"llama-bpe", Family::Llama3, kIgnoreMerges | kAddBos},
    {"falcon3", Family::Llama3, kIgnoreMerges | kAddBos},
    {"falcon-h1", Family::Llama3, kIgnoreMerges | kAddBos},
    {"pixtral", Family::Llama3, kIgnoreMerges | kAddBos},
    {"midm-2.0", Family::Llama3, kIgnoreMerges | kAddBos},
    {"lfm2", Family::Llama3, kIgnoreMerges | kAddBos},
    {"jina-v5-nano", Family::Llama3, kIgnoreMerges | kAddBos},
    {"dbrx", Family::Llama3, 0},
    {"smaug-bpe", Family::Llama3, 0},
    {"glm4", Family::Llama3, kNoBos},
    {"chatglm-bpe", Family::Llama3, kNoBos},
    {"minicpm5", Family::Minicpm5, kIgnoreMerges},
    {"deepseek-llm", Family::DeepseekLlm, kKeepSpaces},
    {"deepseek-coder", Family::DeepseekCoder, kKeepSpaces},
    {"deepseek-v3", Family::Deepseek3, kKeepSpaces},
    {"hunyuan-dense", Family::Deepseek3, kKeepSpaces},
    {"joyai-llm", Family::Deepseek3, kKeepSpaces},
    {"youtu", Family::Youtu, kKeepSpaces | kIgnoreMerges},
    {"falcon", Family::Falcon, 0},
    {"gpt-2", Family::Gpt2, 0},
    {"phi-2", Family::Gpt2, 0},
    {"jina-es", Family::Gpt2, 0},
    {"jina-de", Family::Gpt2, 0},
    {"gigachat", Family::Gpt2, 0},
    {"jina-v2-es", Family::Gpt2, 0},
    {"jina-v2-de", Family::Gpt2, 0},
    {"a.x-4.0", Family::Gpt2, 0},
    {"mellum", Family::Gpt2, 0},
    {"modern-bert", Family::Gpt2, 0},
    {"jina-v1-en", Family::Gpt2, 0},  // these three add a SEP token, which only WordPiece emits
    {"jina-v2-code", Family::Gpt2, 0},
    {"roberta-bpe", Family::Gpt2, 0},
    {"mpt", Family::Gpt2, 0},
    {"olmo", Family::Gpt2, 0},
    {"jais", Family::Gpt2, 0},
    {"exaone4", Family::Gpt2, 0},
    {"trillion", Family::Gpt2, kKeepSpaces},
    {"granite-docling", Family::Gpt2, kKeepSpaces},
    {"jais-2", Family::Jais2, 0},
    {"starcoder", Family::Starcoder, 0},
    {"refact", Family::Starcoder, 0},
    {"command-r", Family::Starcoder, kKeepSpaces},
    {"smollm", Family::Starcoder, kKeepSpaces},
    {"codeshell", Family::Starcoder, 0},
    {"exaone", Family::Starcoder, 0},
    {"minerva-7b", Family::Starcoder, 0},
    {"mellum2", Family::Starcoder, 0},
    {"qwen2", Family::Qwen2, kKeepSpaces},
    {"deepseek-r1-qwen", Family::Qwen2, kKeepSpaces},
    {"kormo", Family::Qwen2, kKeepSpaces},
    {"f2llmv2", Family::Qwen2, kKeepSpaces},
    {"megrez", Family::Qwen2, 0},
    {"stablelm2", Family::Qwen2, 0},
    {"hunyuan", Family::Qwen2, kKeepSpaces},
    {"solar-open", Family::Qwen2, kKeepSpaces},
    {"grok-2", Family::Qwen2, kKeepSpaces},
    {"qwen35", Family::Qwen35, kKeepSpaces},
    {"poro-chat", Family::Bloom, kKeepSpaces},
    {"bloom", Family::Bloom, 0},
    {"gpt3-finnish", Family::Bloom, 0},
    {"viking", Family::Viking, kKeepSpaces},
    {"tekken", Family::Tekken, kKeepSpaces | kIgnoreMerges | kAddBos},
    {"chameleon", Family::Chameleon, kAddBos | kKeepSpaces},
    {"gpt-4o", Family::Gpt4o, kKeepSpaces},
    {"llama4", Family::Gpt4o, kKeepSpaces},
    {"kanana2", Family::Gpt4o, kKeepSpaces},
    {"talkie", Family::Gpt4o, kKeepSpaces},
    {"minimax-m2", Family::Gpt4o, kKeepSpaces},
    {"granite-embed-multi-97m", Family::GraniteEmbMulti, kKeepSpaces | kIgnoreMerges},
    {"tiny_aya", Family::TinyAya, kKeepSpaces},
    {"cohere2moe", Family::TinyAya, kKeepSpaces},
    {"superbpe", Family::SuperBpe, kKeepSpaces},
    {"bailingmoe", Family::Bailing, kKeepSpaces},
    {"bailingmoe2", Family::Bailing, kKeepSpaces},
    {"llada-moe", Family::Bailing, kKeepSpaces},
    {"seed-coder", Family::SeedCoder, kKeepSpaces},
    {"kimi-k2", Family::KimiK2, kKeepSpaces},
    {"afmoe", Family::Afmoe, kKeepSpaces},
    {"laguna", Family::Laguna, kKeepSpaces},
    {"exaone-moe", Family::ExaoneMoe, 0},
};

// Accepted by llama.cpp, but not byte-level: they write spaces as U+2581 and merge raw UTF-8.
const char *const kNotByteLevel[] = {"gemma4", "granite-embed-multi-311m", "sarvam-moe", "whitespace"};

#undef LLM_CONTRACTIONS
#undef LLM_LM_NOT_LOWER
#undef LLM_LM_NOT_UPPER
#undef LLM_PS
#undef LLM_NOT_LPS
#undef LLM_HAN_RANGES

PreTokenizerConfig config_for(Family family) {
    PreTokenizerConfig c;
    auto set = [&c](const char *kind, std::vector<std::string> regexes) {
        c.kind = kind;
        c.regexes = std::move(regexes);
    };
    switch (family) {
    case Family::Default: set("default", {kDefaultPunct, kGpt2, R"re(\p{N}+)re", "[0-9][0-9][0-9]"}); break;
    case Family::Gpt2: set("gpt2", {kGpt2}); break;
    case Family::Llama3: set("llama3", {kLlama3}); break;
    case Family::Qwen2: set("qwen2", {kQwen2}); break;
    case Family::Qwen35: set("qwen35", {kQwen35}); break;
    case Family::Tekken: set("tekken", {kTekken}); break;
    case Family::Starcoder: set("starcoder", {R"re(\p{N})re", kGpt2}); break;
    case Family::Falcon: set("falcon", {R"re([\p{P}\$\+<=>\^~\|`]+)re", kGpt2, "[0-9][0-9][0-9]"}); break;
    case Family::DeepseekLlm:
        set("deepseek-llm",
            {"[\r\n]", kDeepseekLlmLetters, kDeepseekLlmPunct, kTrailingSpace, kDeepseekCjk, R"re(\p{N}+)re"});
        break;
    case Family::DeepseekCoder:
        set("deepseek-coder", {"[\r\n]", R"re(\s?\p{L}+)re", R"re(\s?\p{P}+)re", kDeepseekCjk, R"re(\p{N})re"});
        break;
    case Family::Deepseek3: set("deepseek-v3", {R"re(\p{N}{1,3})re", kDeepseek3Cjk, kDeepseek3Words}); break;
    case Family::Youtu: set("youtu", {kYoutuCjk, kYoutuWords}); break;
    case Family::Jais2: set("jais-2", {kJais2}); break;
    case Family::Bloom: set("bloom", {kBloom}); break;
    case Family::Viking: set("viking", {kBloom, R"re(\p{N})re"}); break;
    case Family::Chameleon:
        set("chameleon", {"<sentinel:[0-9]+>", "(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z", "([\t\n]|    |  )",
                          R"re(\p{N})re", R"re([\p{P}!-/:-@\[-`{-~])re", kGpt2});
        break;
    case Family::Gpt4o: set("gpt-4o", {kGpt4o}); break;
    case Family::GraniteEmbMulti: set("granite-embed-multi", {kGraniteEmbMulti}); break;
    case Family::TinyAya: set("tiny_aya", {kDigitGroupsGlued, kCasefreeWords}); break;
    case Family::KimiK2: set("kimi-k2", {kKimiK2}); break;
    case Family::SuperBpe: set("superbpe", {R"re(\p{N}+)re", kDigitTriplesFromRight}); break;
    case Family::Bailing: set("bailingmoe", {kBailing}); break;
    case Family::SeedCoder: set("seed-coder", {kSeedCoder}); break;
    case Family::Afmoe: set("afmoe", {kDigitGroupsGlued, kAfmoeCjk, kDeepseek3Words}); break;
    case Family::Laguna: set("laguna", {R"re([^\n]+|\n+)re", kQwen2}); break;
    case Family::ExaoneMoe: set("exaone-moe", {kExaoneMoe}); break;
    case Family::Minicpm5: set("minicpm5", {R"re(\p{N}{1,3})re", kMinicpm5}); break;
    }
    return c;
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
        log().warn(
            "tokenizer: tokenizer.ggml.pre is missing; using the default pre-tokenizer, tokens may differ "
            "from the model's training");
        return config_for(Family::Default);
    }
    for (const PreEntry &e : kPreTable) {
        if (*pre != e.pre) continue;
        PreTokenizerConfig c = config_for(e.family);
        c.ignore_merges = (e.flags & kIgnoreMerges) != 0;
        c.add_bos = (e.flags & kAddBos) != 0;
        c.clean_spaces = (e.flags & kKeepSpaces) == 0;
        c.no_bos = (e.flags & kNoBos) != 0;
        return c;
    }
    for (const char *name : kNotByteLevel) {
        if (*pre == name)
            fail(LLM_ERR_UNSUPPORTED,
                 "tokenizer.ggml.pre '{}' is not a byte-level BPE pre-tokenizer; it is not "
                 "supported",
                 *pre);
    }
    // llama.cpp refuses these too: guessing a pre-tokenizer gives plausible but wrong tokens.
    fail(LLM_ERR_UNSUPPORTED, "unknown tokenizer.ggml.pre '{}'", *pre);
}

PreTokenizerConfig gemma4_pre_tokenizer() {
    PreTokenizerConfig c;
    c.kind = "gemma4";
    c.regexes = {R"re([^\n]+|[\n]+)re"};
    c.add_bos = true;
    c.byte_level = false;
    return c;
}

std::vector<std::string> pre_tokenizer_names() {
    std::vector<std::string> names;
    for (const PreEntry &e : kPreTable) names.emplace_back(e.pre);
    return names;
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
                // A pattern that matches only the empty string (superbpe's digit-group lookahead) cuts the
                // piece there, as std::regex's iterator does in llama.cpp; the search goes on one character on.
                if (start > gap) out.push_back(piece.substr(gap, start - gap));
                gap = start;
                if (start >= piece.size()) break;
                pos = std::min(piece.size(), start + utf8::seq_len(static_cast<unsigned char>(piece[start])));
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
