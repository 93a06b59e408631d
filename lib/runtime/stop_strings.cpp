#include "runtime/stop_strings.h"

#include <algorithm>

namespace llm {

void StopStrings::set(std::vector<std::string> stops) {
    stops_ = std::move(stops);
    clear();
}

void StopStrings::clear() {
    held_.clear();
    spans_.clear();
}

void StopStrings::prepend(const std::string &text, int32_t pos) {
    if (text.empty()) return;
    held_.insert(0, text);
    spans_.insert(spans_.begin(), Span{pos, text.size()});
}

std::string StopStrings::flush() {
    std::string out;
    out.swap(held_);
    spans_.clear();
    return out;
}

size_t StopStrings::partial_tail() const {
    size_t best = 0;
    for (const std::string &s : stops_) {
        for (size_t n = std::min(held_.size(), s.size() - 1); n > best; --n) {
            if (std::string_view(held_).substr(held_.size() - n) == std::string_view(s).substr(0, n)) {
                best = n;
                break;
            }
        }
    }
    return best;
}

void StopStrings::drop_front(size_t n) {
    held_.erase(0, n);
    size_t i = 0;
    while (i < spans_.size() && n > 0) {
        if (spans_[i].bytes <= n) {
            n -= spans_[i].bytes;
            ++i;
        } else {
            // A token cut in the middle stays whole in the context; only its tail is still held.
            spans_[i].bytes -= n;
            n = 0;
        }
    }
    // Tokens with no text (control tokens) before what is still held need no record either.
    while (i < spans_.size() && spans_[i].bytes == 0) ++i;
    spans_.erase(spans_.begin(), spans_.begin() + static_cast<std::ptrdiff_t>(i));
}

StopStrings::Result StopStrings::add(std::string_view piece, int32_t pos) {
    Result r;
    held_.append(piece);
    spans_.push_back({pos, piece.size()});
    // Every byte before held_ was handed out because no stop string could start there, so the first
    // occurrence, if any, starts inside held_.
    size_t first = std::string::npos;
    for (const std::string &s : stops_) first = std::min(first, held_.find(s));
    if (first != std::string::npos) {
        r.stopped = true;
        r.text = held_.substr(0, first);
        // The token holding byte `first` is the first one cut (a context holds whole tokens).
        size_t at = 0;
        r.cut = pos;
        for (const Span &sp : spans_) {
            if (first < at + sp.bytes) {
                r.cut = sp.pos;
                break;
            }
            at += sp.bytes;
        }
        clear();
        return r;
    }
    const size_t keep = partial_tail();
    r.text = held_.substr(0, held_.size() - keep);
    drop_front(r.text.size());
    return r;
}

void StopStrings::shift(int32_t keep, int32_t discard) {
    for (Span &sp : spans_) {
        if (sp.pos >= keep + discard) sp.pos -= discard;
    }
}

}  // namespace llm
