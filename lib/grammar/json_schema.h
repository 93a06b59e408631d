// JSON Schema (draft 2020-12) -> GBNF, for JSON output that fits a schema. Supported: type (and
// lists of types), enum, const, properties, required, additionalProperties, items, prefixItems,
// minItems, maxItems, minLength, maxLength, integer bounds (minimum, maximum, exclusive*), pattern
// (grammar/regex_gbnf.h), format date / time / date-time / uuid, anyOf, oneOf (as anyOf), allOf (of
// schemas that merge exactly), $ref to "#" and "#/..." with $defs / definitions; annotations are
// ignored. Anything else is refused by name (LLM_ERR_UNSUPPORTED), never ignored.
//
// The grammar never accepts an instance the schema rejects: where the converter cannot express a
// keyword exactly it refuses the schema, and where it is narrower (object members in declared order,
// additional members after the declared ones) it rejects some valid instances instead. Whitespace
// between tokens: none, a space, or one or two line breaks and indentation (llama.cpp's).
#pragma once

#include <string>
#include <string_view>

namespace llm::grammar {

// The GBNF grammar (start rule "root") for the schema's JSON text. Throws Error: LLM_ERR_INVALID_ARGUMENT
// for text that is not JSON, LLM_ERR_UNSUPPORTED naming what is not supported.
std::string json_schema_to_gbnf(std::string_view schema_text);

}  // namespace llm::grammar
