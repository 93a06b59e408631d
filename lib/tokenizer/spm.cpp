#include "tokenizer/spm.h"

#include <queue>
#include <unordered_map>
#include <utility>

#include "core/error.h"
#include "core/utf8.h"

namespace llm {

namespace {

constexpr std::string_view kSpaceMark = "\xE2\x96\x81";  // U+2581, SentencePiece's visible space

VocabDefaults spm_defaults() {
    VocabDefaults d;
    d.bos = 1;
    d.eos = 2;
    d.unk = 0;
    d.add_bos = true;
    d.add_space_prefix = true;
    return d;
}

// One pass of merges over one fragment. Symbols form a linked list over the fragment's bytes; merging
// grows the left symbol and unlinks the right one, so a symbol of length 0 is dead.
class SpmSession {
public:
    SpmSession(const Vocab &vocab, const std::array<int32_t, 256> &byte_ids, const std::string &text)
        : vocab_(vocab), byte_ids_(byte_ids), text_(text) {}

    void run(std::vector<int32_t> &out) {
        for (size_t off = 0; off < text_.size();) {
            size_t n = std::min(utf8::seq_len(static_cast<unsigned char>(text_[off])), text_.size() - off);
            int idx = static_cast<int>(syms_.size());
            syms_.push_back({off, n, idx - 1, off + n == text_.size() ? -1 : idx + 1});
            off += n;
        }
        if (syms_.empty()) return;
        for (int i = 1; i < static_cast<int>(syms_.size()); ++i) try_pair(i - 1, i);

        while (!queue_.empty()) {
            Pair p = queue_.top();
            queue_.pop();
            Symbol &l = syms_[p.left];
            Symbol &r = syms_[p.right];
            // Stale entry: a side was merged elsewhere since this pair was queued.
            if (l.n == 0 || r.n == 0 || l.n + r.n != p.size) continue;
            l.n += r.n;
            r.n = 0;
            l.next = r.next;
            if (r.next >= 0) syms_[r.next].prev = p.left;
            try_pair(l.prev, p.left);
            try_pair(p.left, l.next);
        }
        for (int i = 0; i != -1; i = syms_[i].next) emit(syms_[i].off, syms_[i].n, out);
    }

private:
    struct Symbol {
        size_t off, n;
        int prev, next;
    };
    struct Pair {
        int left, right;
        float score;
        size_t size;
    };
    // Highest score first; among equal scores the leftmost pair, as SentencePiece does.
    struct Worse {
        bool operator()(const Pair &a, const Pair &b) const {
            return a.score < b.score || (a.score == b.score && a.left > b.left);
        }
    };

    void try_pair(int left, int right) {
        if (left < 0 || right < 0) return;
        std::string s = text_.substr(syms_[left].off, syms_[left].n + syms_[right].n);
        int32_t id = vocab_.find(s);
        if (id < 0) return;
        queue_.push({left, right, vocab_.score(id), s.size()});
        rev_merge_[std::move(s)] = {left, right};
    }

    // A final symbol is normally a token; otherwise undo the merges that built it, and spell what is
    // left byte by byte.
    void emit(size_t off, size_t n, std::vector<int32_t> &out) {
        std::string s = text_.substr(off, n);
        if (int32_t id = vocab_.find(s); id >= 0) {
            out.push_back(id);
            return;
        }
        if (auto it = rev_merge_.find(s); it != rev_merge_.end()) {
            const Symbol &l = syms_[it->second.first];
            const Symbol &r = syms_[it->second.second];
            emit(l.off, l.n, out);
            emit(r.off, r.n, out);
            return;
        }
        for (size_t i = 0; i < n; ++i) {
            auto b = static_cast<unsigned char>(text_[off + i]);
            if (byte_ids_[b] < 0) {
                fail(LLM_ERR_UNSUPPORTED,
                     "cannot encode byte 0x{:02X}: the vocab has neither <0x{:02X}> nor the "
                     "byte itself",
                     b, b);
            }
            out.push_back(byte_ids_[b]);
        }
    }

    const Vocab &vocab_;
    const std::array<int32_t, 256> &byte_ids_;
    const std::string &text_;
    std::vector<Symbol> syms_;
    std::priority_queue<Pair, std::vector<Pair>, Worse> queue_;
    std::unordered_map<std::string, std::pair<int, int>> rev_merge_;
};

}  // namespace

SpmTokenizer::SpmTokenizer(const Metadata &meta) : vocab_(Vocab::load(meta, spm_defaults())) {
    for (int b = 0; b < 256; ++b) {
        int32_t id = vocab_.find(fmt::format("<0x{:02X}>", b));
        if (id < 0) id = vocab_.find(std::string(1, static_cast<char>(b)));
        byte_ids_[b] = id;
    }
}

void SpmTokenizer::encode_text(std::string_view text, bool parse_special, std::vector<int32_t> &out) const {
    // SentencePiece sees every text run as the start of a "sentence": the first one and any run that
    // follows a special token get the leading space its training data always had.
    bool after_special = true;
    std::string escaped;
    for (const Fragment &f : vocab_.partition(text, parse_special)) {
        if (f.is_token()) {
            out.push_back(f.id);
            after_special = true;
            continue;
        }
        escaped.clear();
        if (vocab_.add_space_prefix() && after_special) escaped = kSpaceMark;
        for (char c : f.text) {
            if (c == ' ')
                escaped += kSpaceMark;
            else
                escaped += c;
        }
        encode_fragment(escaped, out);
        after_special = false;
    }
}

void SpmTokenizer::encode_fragment(const std::string &text, std::vector<int32_t> &out) const {
    SpmSession(vocab_, byte_ids_, text).run(out);
}

std::string SpmTokenizer::piece(int32_t id) const {
    if (!vocab_.valid(id)) fail(LLM_ERR_INVALID_ARGUMENT, "token id {} is out of range (n_vocab {})", id, n_vocab());
    const std::string &t = vocab_.text(id);
    const uint32_t a = vocab_.attr(id);
    if (a & kAttrControl) return "";
    if (a & kAttrUserDefined) return t;
    if (a & kAttrNormal) {
        std::string s;
        s.reserve(t.size());
        for (size_t i = 0; i < t.size();) {
            if (t.compare(i, kSpaceMark.size(), kSpaceMark) == 0) {
                s += ' ';
                i += kSpaceMark.size();
            } else {
                s += t[i++];
            }
        }
        return s;
    }
    if (a & kAttrByte) {
        // "<0xXX>"; a malformed byte token prints as nothing rather than as garbage.
        if (t.size() != 6 || t.compare(0, 3, "<0x") != 0) return "";
        return std::string(1, static_cast<char>(std::stoi(t.substr(3, 2), nullptr, 16)));
    }
    return "";  // unknown, unused, undefined
}

}  // namespace llm
