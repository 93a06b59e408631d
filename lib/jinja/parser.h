// Tokens -> Template, following Jinja2's grammar and operator precedence (parser.py): the same
// statements, the same binding of unary minus, filters, tests and conditional expressions.
#pragma once

#include <string_view>

#include "jinja/ast.h"

namespace llm::jinja {

// Fails with a syntax TemplateError (line set) on malformed templates, unsupported for Jinja features this
// interpreter leaves out (extends, include, import, call blocks, ...), and a limit TemplateError when
// nesting exceeds max_depth.
Template parse(std::string_view source, const Limits &limits);

}  // namespace llm::jinja
