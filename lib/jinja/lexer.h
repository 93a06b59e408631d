// Template source -> tokens, with Jinja2's whitespace rules as HF configures them: trim_blocks (one
// newline after a block or comment tag is dropped), lstrip_blocks (spaces before a block or comment
// tag on its own line are dropped), `-` / `+` markers on tags, and one trailing newline of the source dropped.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace llm::jinja {

enum class Tok : uint8_t { Data, VarBegin, VarEnd, BlockBegin, BlockEnd, Name, String, Int, Float, Op, Eof };

struct Token {
    Tok type;
    int line;
    std::string text;  // Data, Name, Op, String (unescaped)
    int64_t ival = 0;
    double fval = 0;
};

// Fails (syntax) on an unterminated tag or comment, a bad character or an unbalanced bracket.
std::vector<Token> tokenize(std::string_view source);

}  // namespace llm::jinja
