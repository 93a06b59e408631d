// Python str semantics over UTF-8 bytes: strings index by code point, and whitespace, case and
// repr() follow Python's Unicode rules. Case mapping covers the scripts whose rules we carry
// (Latin, Greek, Cyrillic, Armenian and caseless scripts); any other letter is refused rather than guessed.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace llm::jinja::text {

// Decodes UTF-8; an invalid byte becomes one code point 0xDC00 + byte (Python's surrogateescape), so
// encode(decode(s)) == s for any bytes.
std::vector<uint32_t> decode(std::string_view s);
uint32_t next_cp(std::string_view s, size_t i, size_t *len);  // the code point at byte i and its byte length
void append_utf8(std::string &out, uint32_t cp);
std::string encode(const std::vector<uint32_t> &cps, size_t begin, size_t end);
size_t length(std::string_view s);  // code points
bool is_ascii(std::string_view s);

bool is_space(uint32_t cp);  // str.isspace()
// str.strip/lstrip/rstrip; chars: nullopt strips whitespace.
std::string strip(std::string_view s, const std::optional<std::string> &chars, bool left, bool right);
// str.split / str.rsplit; sep: nullopt splits on runs of whitespace.
// max_parts (0: none) bounds the result; more fails as a limit.
std::vector<std::string> split(std::string_view s, const std::optional<std::string> &sep, int64_t maxsplit,
                               bool from_right = false, size_t max_parts = 0);
std::vector<std::string> splitlines(std::string_view s, bool keepends);
std::string replace(std::string_view s, std::string_view old, std::string_view with, int64_t count);
int64_t count(std::string_view s, std::string_view sub);  // non-overlapping, in code points' terms
// find/rfind as code point indexes, -1 when absent.
int64_t find(std::string_view s, std::string_view sub, bool from_right);

// Case mapping; fails as unsupported for a cased letter outside the scripts we carry.
std::string upper(std::string_view s);
std::string lower(std::string_view s);
std::string capitalize(std::string_view s);  // str.capitalize()
std::string title_words(std::string_view s);  // Jinja's |title: words split at whitespace and -([{<
std::string py_title(std::string_view s);     // str.title()
bool is_cased(uint32_t cp);                   // has an upper or lower case form
bool all_cased_match(std::string_view s, bool want_upper);  // str.isupper() / str.islower()

std::string repr(std::string_view s);         // Python repr() of a str
std::string html_escape(std::string_view s);  // markupsafe.escape

}  // namespace llm::jinja::text
