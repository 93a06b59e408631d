#include "tokenizer/bpe.h"

#include <charconv>
#include <queue>
#include <utility>

#include "core/error.h"
#include "core/utf8.h"

namespace llm {

namespace {

VocabDefaults bpe_defaults(const PreTokenizerConfig &pre) {
    VocabDefaults d;
    if (!pre.byte_level) {  // gemma4: special ids only from the file
        d.add_bos = true;
        return d;
    }
    // Placeholders from llama.cpp; every real file writes its own ids.
    d.bos = pre.no_bos ? -1 : 11;
    d.eos = 11;
    d.add_bos = pre.add_bos;
    return d;
}

// GPT-2 spells every byte as a printable code point so that vocab entries are readable text: bytes that
// already print as themselves keep their code point, the other 68 move to U+0100.. in byte order (§5.2).
struct ByteMap {
    std::array<std::string, 256> to_text;  // byte -> UTF-8 of its stand-in
    std::array<int16_t, 0x180> to_byte;    // stand-in code point -> byte, -1 for code points never used
};

const ByteMap &byte_map() {
    static const ByteMap m = [] {
        ByteMap m;
        m.to_byte.fill(-1);
        uint32_t next = 0x100;
        for (uint32_t b = 0; b < 256; ++b) {
            const bool prints = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
            const uint32_t cp = prints ? b : next++;
            m.to_byte[cp] = static_cast<int16_t>(b);
            utf8::append(m.to_text[b], cp);
        }
        return m;
    }();
    return m;
}

// HF's clean_up_tokenization, whose replacements run one after another over the whole text. " 't",
// " 'd" and " 'll" keep their space.
std::string clean_up_spaces(std::string s) {
    static const std::pair<std::string_view, std::string_view> kRules[] = {
        {" .", "."},   {" ?", "?"},   {" !", "!"},     {" ,", ","},     {" ' ", "'"},
        {" 's", "'s"}, {" 'm", "'m"}, {" 're", "'re"}, {" 've", "'ve"},
    };
    std::string o;
    for (auto [from, to] : kRules) {
        o.clear();
        size_t i = 0;
        for (size_t at; (at = s.find(from, i)) != std::string::npos; i = at + from.size())
            o.append(s, i, at - i).append(to);
        o.append(s, i);
        s.swap(o);
    }
    return s;
}

// Merges within one byte-encoded pre-token. Symbols are a linked list over the word; a merge grows the
// left symbol and empties the right one.
class BpeSession {
public:
    BpeSession(const BpeTokenizer &tok, const std::string &word) : tok_(tok), word_(word) {}

    // Leaves the final symbols' texts in order.
    std::vector<std::string_view> run() {
        for (size_t off = 0; off < word_.size();) {
            size_t n = std::min(utf8::seq_len(static_cast<unsigned char>(word_[off])), word_.size() - off);
            int idx = static_cast<int>(syms_.size());
            syms_.push_back({off, n, idx - 1, off + n == word_.size() ? -1 : idx + 1});
            off += n;
        }
        for (int i = 1; i < static_cast<int>(syms_.size()); ++i) try_pair(i - 1, i);

        while (!queue_.empty()) {
            Pair p = queue_.top();
            queue_.pop();
            Symbol &l = syms_[p.left];
            Symbol &r = syms_[p.right];
            // Stale entry: since it was queued a side was merged away or grew, so its text changed.
            if (l.n != p.left_n || r.n != p.right_n) continue;
            l.n += r.n;
            r.n = 0;
            l.next = r.next;
            if (r.next >= 0) syms_[r.next].prev = p.left;
            try_pair(l.prev, p.left);
            try_pair(p.left, l.next);
        }

        std::vector<std::string_view> out;
        for (int i = syms_.empty() ? -1 : 0; i != -1; i = syms_[i].next)
            out.push_back(std::string_view(word_).substr(syms_[i].off, syms_[i].n));
        return out;
    }

private:
    struct Symbol {
        size_t off, n;
        int prev, next;
    };
    struct Pair {
        int left, right;
        int32_t rank;
        size_t left_n, right_n;
    };
    // Lowest rank first; among equal ranks (only possible for the same pair twice) the leftmost.
    struct Later {
        bool operator()(const Pair &a, const Pair &b) const {
            return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
        }
    };

    void try_pair(int left, int right) {
        if (left < 0 || right < 0) return;
        const Symbol &l = syms_[left], &r = syms_[right];
        std::string_view w(word_);
        int32_t rank = tok_.rank(w.substr(l.off, l.n), w.substr(r.off, r.n));
        if (rank >= 0) queue_.push({left, right, rank, l.n, r.n});
    }

    const BpeTokenizer &tok_;
    const std::string &word_;
    std::vector<Symbol> syms_;
    std::priority_queue<Pair, std::vector<Pair>, Later> queue_;
};

}  // namespace

BpeTokenizer::BpeTokenizer(const Metadata &meta, bool gemma4)
    : pre_(gemma4 ? gemma4_pre_tokenizer() : pre_tokenizer_config(meta.str("tokenizer.ggml.pre"))),
      vocab_(Vocab::load(meta, bpe_defaults(pre_))), splitter_(pre_.regexes) {
    read_merges(meta);
    if (gemma4) vocab_.force_add_bos();
    for (int b = 0; b < 256; ++b)
        byte_ids_[b] = vocab_.find(pre_.byte_level ? std::string(1, static_cast<char>(b)) : fmt::format("<0x{:02X}>", b));
}

void BpeTokenizer::read_merges(const Metadata &meta) {
    const std::vector<std::string> *merges = meta.str_array("tokenizer.ggml.merges");
    if (!merges) fail(LLM_ERR_FORMAT, "required metadata key 'tokenizer.ggml.merges' is missing");
    ranks_.reserve(merges->size());
    for (size_t i = 0; i < merges->size(); ++i) {
        const std::string &m = (*merges)[i];
        // The left side may itself be a space (in non-byte-level vocabs), hence the search from 1. The
        // line itself is the key: rank() joins the two sides with one space again.
        const size_t sp = m.size() > 1 ? m.find(' ', 1) : std::string::npos;
        if (sp == std::string::npos || sp + 1 >= m.size())
            fail(LLM_ERR_FORMAT, "'tokenizer.ggml.merges'[{}] = '{}' is not 'left right'", i, m);
        // A repeated merge keeps its first (highest-priority) rank.
        ranks_.emplace(m, static_cast<int32_t>(i));
    }
}

int32_t BpeTokenizer::rank(std::string_view left, std::string_view right) const {
    std::string key;
    key.reserve(left.size() + 1 + right.size());
    key.append(left).append(1, ' ').append(right);
    auto it = ranks_.find(key);
    return it == ranks_.end() ? -1 : it->second;
}

void BpeTokenizer::encode_text(std::string_view text, bool parse_special, std::vector<int32_t> &out) const {
    for (const Fragment &f : vocab_.partition(text, parse_special)) {
        if (f.is_token()) {
            out.push_back(f.id);
            continue;
        }
        if (pre_.byte_level) {
            for (std::string_view word : splitter_.split(f.text)) encode_word(word, out);
            continue;
        }
        // Not byte-level: every space becomes U+2581 before the split.
        std::string escaped;
        escaped.reserve(f.text.size() + f.text.size() / 2);
        for (char c : f.text) c == ' ' ? escaped.append("\xE2\x96\x81") : escaped.append(1, c);
        for (std::string_view word : splitter_.split(escaped)) encode_word(word, out);
    }
}

void BpeTokenizer::encode_word(std::string_view raw, std::vector<int32_t> &out) const {
    std::string word;
    if (pre_.byte_level) {
        const ByteMap &bm = byte_map();
        word.reserve(raw.size() * 2);
        for (char c : raw) word += bm.to_text[static_cast<unsigned char>(c)];
    } else {
        word = raw;
        // A run of newlines that is a token is taken whole, unmerged.
        if (word.find_first_not_of('\n') == std::string::npos) {
            if (int32_t id = vocab_.find(word); id >= 0) {
                out.push_back(id);
                return;
            }
        }
    }

    // Llama 3 and Tekken trust a whole-word vocab entry over what the merges would build.
    if (pre_.ignore_merges) {
        if (int32_t id = vocab_.find(word); id >= 0) {
            out.push_back(id);
            return;
        }
    }
    for (std::string_view sym : BpeSession(*this, word).run()) {
        if (int32_t id = vocab_.find(std::string(sym)); id >= 0) {
            out.push_back(id);
            continue;
        }
        // Byte-level, merges that lead outside the vocab are a broken file; otherwise the byte fallback.
        // Either way spell what bytes we can and drop the rest, as llama.cpp does.
        for (char c : sym)
            if (int32_t id = byte_ids_[static_cast<unsigned char>(c)]; id >= 0) out.push_back(id);
    }
}

std::string BpeTokenizer::piece(int32_t id) const {
    if (!vocab_.valid(id)) fail(LLM_ERR_INVALID_ARGUMENT, "token id {} is out of range (n_vocab {})", id, n_vocab());
    const std::string &t = vocab_.text(id);
    const uint32_t a = vocab_.attr(id);
    if (a & kAttrControl) return "";
    if (a & kAttrUserDefined) return t;
    if ((a & kAttrNormal) && !pre_.byte_level) {
        std::string s;
        s.reserve(t.size());
        for (size_t i = 0; i < t.size();) {
            if (t.compare(i, 3, "\xE2\x96\x81") == 0) {
                s += ' ';
                i += 3;
            } else {
                s += t[i++];
            }
        }
        return s;
    }
    if (a & kAttrNormal) {
        const ByteMap &bm = byte_map();
        std::string s;
        s.reserve(t.size());
        size_t len = 1;
        for (size_t i = 0; i < t.size(); i += len) {
            uint32_t cp = 0;  // a malformed byte stands for itself
            if (utf8::decode_at(t, i, &cp, &len) && cp < bm.to_byte.size() && bm.to_byte[cp] >= 0)
                s += static_cast<char>(bm.to_byte[cp]);
            else
                s += fmt::format("[UNK_BYTE_0x{:02X}]", cp);
        }
        return s;
    }
    if (a & kAttrByte) {
        // "<0xXX>" as in Gemma-style vocabs, or the byte itself; anything else prints as nothing.
        unsigned v = 0;
        if (t.size() == 6 && t.compare(0, 3, "<0x") == 0 &&
            std::from_chars(t.data() + 3, t.data() + 5, v, 16).ptr == t.data() + 5)
            return std::string(1, static_cast<char>(v));
        return t.size() == 1 ? t : "";
    }
    return "";  // unknown, unused, undefined
}

std::string BpeTokenizer::decode(const std::vector<int32_t> &ids) const {
    std::string text;
    for (int32_t id : ids) text += piece(id);
    return pre_.clean_spaces ? clean_up_spaces(std::move(text)) : text;
}

}  // namespace llm
