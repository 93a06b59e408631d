// Stop strings (llm_session_set_stop): generated text is handed out only once it can no longer be
// the start of a stop string; a complete stop string ends generation, and neither it nor the tokens
// that hold any of its bytes stay in the context. Pure bookkeeping over text and context positions:
// the session decides what to evaluate and what to cut.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace llm {

class StopStrings {
public:
    // Replaces the list (each non-empty; the caller checks) and forgets any held text.
    void set(std::vector<std::string> stops);
    bool empty() const { return stops_.empty(); }
    const std::vector<std::string> &strings() const { return stops_; }

    struct Result {
        std::string text;      // to hand out now: it cannot begin a stop string (or precedes the one found)
        bool stopped = false;  // a stop string is complete
        int32_t cut = -1;      // when stopped: the context position of the first token holding any of its bytes
    };
    // Adds the piece of the generated token at context position pos (not yet accepted: pos == n_past).
    // The held text is the shortest tail that may still begin a stop string; the first stop string
    // found (lowest start) ends it: its text and everything after it are dropped.
    Result add(std::string_view piece, int32_t pos);

    // The text held back, handed out at the end of generation, and forgotten.
    std::string flush();
    const std::string &held() const { return held_; }
    void clear();
    // Puts text handed out but not delivered back in front of the held text, as tokens at pos.
    void prepend(const std::string &text, int32_t pos);
    // Context shift: positions in [keep, keep + discard) are gone and later ones move down by discard.
    void shift(int32_t keep, int32_t discard);

private:
    struct Span {
        int32_t pos;   // context position of the token
        size_t bytes;  // how many of its bytes are in held_ (the first span's may be fewer than its piece)
    };
    // The longest tail of held_ that is a proper prefix of some stop string.
    size_t partial_tail() const;
    // Forgets the first n bytes of held_ (handed out) and the spans they cover.
    void drop_front(size_t n);

    std::vector<std::string> stops_;
    std::string held_;
    std::vector<Span> spans_;  // the tokens behind held_, in order
};

}  // namespace llm
