// lib/core's two small maps every boundary relies on: status_of() (a C++ exception to a status and a
// message) and the UTF-8 helper, checked against Python's UTF-8 decoder (offsets from
// bytes.decode('utf-8')'s UnicodeDecodeError.start).
#include <catch2/catch.hpp>

#include <new>
#include <stdexcept>
#include <string>

#include "core/error.h"
#include "core/utf8.h"

TEST_CASE("status_of: our errors keep their status, others are out of memory or internal", "[core]") {
    std::string msg = "stale";
    CHECK(llm::status_of(nullptr, &msg) == LLM_OK);
    CHECK(llm::status_of(std::make_exception_ptr(llm::Error(LLM_ERR_IO, "cannot read 'x'")), &msg) == LLM_ERR_IO);
    CHECK(msg == "cannot read 'x'");
    CHECK(llm::status_of(std::make_exception_ptr(std::bad_alloc()), &msg) == LLM_ERR_OUT_OF_MEMORY);
    CHECK(msg == "out of memory");
    CHECK(llm::status_of(std::make_exception_ptr(std::logic_error("oops")), &msg) == LLM_ERR_INTERNAL);
    CHECK(msg == "internal error: oops");
    CHECK(llm::status_of(std::make_exception_ptr(42), &msg) == LLM_ERR_INTERNAL);
    CHECK(msg == "internal error: unknown exception");
    // without a message, inside a catch block (as a batch's rollback asks)
    try {
        llm::fail(LLM_ERR_CANCELLED, "cancelled by {}", "the host");
    } catch (...) {
        CHECK(llm::status_of(std::current_exception()) == LLM_ERR_CANCELLED);
    }
}

TEST_CASE("utf8: invalid_at finds the first byte Python's decoder rejects", "[core]") {
    const std::string npos_case =
        "Gr\xc3\xbc\xc3\x9f"
        "e \xf0\x9f\x8c\x8d";
    CHECK(llm::utf8::invalid_at(npos_case) == std::string_view::npos);
    CHECK(llm::utf8::invalid_at("") == std::string_view::npos);
    CHECK(llm::utf8::invalid_at("a\xc0\x80") == 1);           // overlong
    CHECK(llm::utf8::invalid_at("ab\xe0\x80\x80") == 2);      // overlong
    CHECK(llm::utf8::invalid_at("\xed\xa0\x80") == 0);        // surrogate
    CHECK(llm::utf8::invalid_at("xy\xf4\x90\x80\x80") == 2);  // past U+10FFFF
    CHECK(llm::utf8::invalid_at("\xf0\x9f\x8c") == 0);        // truncated
    CHECK(llm::utf8::invalid_at("ok\x80") == 2);              // stray continuation byte
    CHECK(llm::utf8::invalid_at("\xf5\x80\x80\x80") == 0);    // no such lead byte
    CHECK(llm::utf8::invalid_at("\xe2\x82\xac\xc2") == 3);    // truncated at the end
}

TEST_CASE("utf8: append and decode_at agree on every scalar value; seq_len reads the lead byte", "[core]") {
    size_t bad = 0;
    for (uint32_t cp = 0; cp <= 0x10FFFF; ++cp) {
        if (cp >= 0xD800 && cp <= 0xDFFF) continue;
        std::string s;
        llm::utf8::append(s, cp);
        uint32_t back = 0;
        size_t len = 0;
        const size_t want_len = cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
        if (!llm::utf8::decode_at(s, 0, &back, &len) || back != cp || len != want_len || s.size() != want_len ||
            llm::utf8::seq_len(static_cast<unsigned char>(s[0])) != want_len)
            ++bad;
    }
    CHECK(bad == 0);
    uint32_t cp = 0;
    size_t len = 0;
    CHECK(!llm::utf8::decode_at("\xc3", 0, &cp, &len));
    CHECK((cp == 0xC3 && len == 1));
    // the tokenizers' rule: a stray continuation byte is one character, F8-FF announce four
    CHECK(llm::utf8::seq_len(0x80) == 1);
    CHECK(llm::utf8::seq_len(0xFF) == 4);
}
