// JSON Schema `pattern` (an ECMA-262 regular expression, searched anywhere in the string unless
// anchored) -> a GBNF expression for the JSON string literal, quotes included. The regex works on
// the decoded characters, the grammar on the JSON text: a character the regex admits is matched as
// itself, or for `"`, `\` and control characters as their usual escapes (\" \\ \n \t \r \b \f \u00XX)
// only, so every accepted text decodes to a string the regex matches (other spellings, e.g. \u0061
// for a, are rejected: narrower, never wider).
// Supported: literals, `.`, classes with ranges and negation, \d \D \w \W \s \S \t \n \r \f \v \0 \cX
// \xHH \uHHHH and escaped punctuation, groups (capturing and (?:)), `|`, * + ? {m} {m,} {m,n} (lazy
// forms too), ^ at the start and $ at the end. Anything else (\b, backreferences, lookaround, \p{..},
// anchors elsewhere) throws LLM_ERR_UNSUPPORTED naming it.
#pragma once

#include <string>
#include <string_view>

namespace llm::grammar {

// `char_rule` is the name of a rule matching any one JSON string character (an escape included).
std::string regex_to_gbnf(std::string_view pattern, const std::string &char_rule);

}  // namespace llm::grammar
