// Tools in chat templates: every record of shared/chat/tools/vectors.json (the templates that read
// tools, rendered by Python's Jinja2 with tool definitions, assistant tool_calls, role "tool" results
// and documents) rendered by lib/jinja through the same path llm_chat_apply_template_json takes.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "jinja/jinja.h"
#include "llm.h"
#include "chat/tool_parse.h"
#include "runtime/chat.h"
#include "test_files.h"

namespace {

using ojson = nlohmann::ordered_json;

const std::string kChatDir = std::string(LLM_SHARED_DIR) + "/chat";
constexpr int64_t kFixedNow = 1768435200;  // 2026-01-15 00:00:00 UTC, render.py's FIXED_NOW

std::string read_file(const std::string &path) {
    std::ifstream f(path, std::ios::binary);
    REQUIRE(f.good());
    return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

}  // namespace

TEST_CASE("chat tools: every rendering of shared/chat/tools/vectors.json", "[chat][tools]") {
    const ojson vectors = ojson::parse(read_file(kChatDir + "/tools/vectors.json"));
    REQUIRE(vectors.size() == 244);
    std::map<std::string, std::string> sources;
    int identical = 0, errors_matched = 0, wrong = 0, unexpected_error = 0, missing_error = 0;
    for (const auto &rec : vectors) {
        const std::string name = rec["template_file"];
        if (!sources.count(name)) sources[name] = read_file(kChatDir + "/templates/" + name);
        ojson req = ojson::object();
        req["messages"] = rec["messages"];
        req["tools"] = rec["tools"];
        req["documents"] = rec["documents"];
        req["add_generation_prompt"] = rec["add_generation_prompt"];
        llm::jinja::Options opt;
        opt.now = kFixedNow;
        const llm::ChatSpecials specials{rec["bos_token"], rec["eos_token"]};
        std::string text;
        int32_t st = LLM_OK;
        try {
            text = llm::render_chat_request(sources[name], req, specials, opt);
        } catch (const llm::Error &e) {
            st = e.status();
            text = e.what();
        }
        const std::string where = name + " " + rec["conversation_id"].get<std::string>();
        if (rec.contains("error")) {
            if (st != LLM_OK) {
                errors_matched++;
            } else {
                missing_error++;
                std::printf("  problem: %s: %s, but Jinja2 raised %s\n", where.c_str(),
                            st == LLM_OK ? "rendered" : text.c_str(), rec["error"].get<std::string>().c_str());
            }
            continue;
        }
        if (st != LLM_OK) {
            unexpected_error++;
            std::printf("  problem: %s: %s\n", where.c_str(), text.c_str());
            continue;
        }
        const std::string want = rec["output"];
        if (text == want) {
            identical++;
        } else {
            wrong++;
            size_t at = 0;
            while (at < text.size() && at < want.size() && text[at] == want[at]) at++;
            std::printf("  problem: %s: differs at byte %zu\n  got:  %s\n  want: %s\n", where.c_str(), at,
                        text.substr(at > 60 ? at - 60 : 0, 160).c_str(),
                        want.substr(at > 60 ? at - 60 : 0, 160).c_str());
        }
    }
    std::printf("chat tools vectors: %d identical, %d errors matched (of %zu records)\n", identical, errors_matched,
                vectors.size());
    CHECK(wrong == 0);
    CHECK(unexpected_error == 0);
    CHECK(missing_error == 0);
}

namespace {

// llama.cpp's comparison of arguments: equal after a parse and compact dump, or either side not JSON.
bool same_arguments(const std::string &a, const std::string &b) {
    const ojson ja = ojson::parse(a, nullptr, false), jb = ojson::parse(b, nullptr, false);
    if (ja.is_discarded() || jb.is_discarded()) return true;
    return ja.dump() == jb.dump();
}

std::string trim_ws(const std::string &s) {
    const size_t b = s.find_first_not_of(" \t\r\n");
    if (b == std::string::npos) return "";
    return s.substr(b, s.find_last_not_of(" \t\r\n") - b + 1);
}

}  // namespace

TEST_CASE("chat parse: the cases of shared/chat/parse/vectors.json", "[chat][tools]") {
    const ojson vectors = ojson::parse(read_file(kChatDir + "/parse/vectors.json"));
    REQUIRE(vectors.size() == 250);
    std::map<std::string, std::string> sources;
    std::map<std::string, std::pair<int, int>> per_format;  // passed, total
    int passed = 0;
    for (const auto &rec : vectors) {
        const std::string name = rec["template_file"];
        if (!sources.count(name)) sources[name] = read_file(kChatDir + "/templates/" + name);
        ojson params = rec["params"];
        params["is_partial"] = rec["is_partial"];
        const std::string id = rec["id"];
        const ojson &want = rec["expected"];
        std::string why;
        try {
            const auto got = llm::chat::parse_output(sources[name], rec["raw_output"].get<std::string>(),
                                                     llm::chat::parse_params(params), llm::ChatSpecials{});
            const auto &m = got.msg;
            if (trim_ws(m.content) != trim_ws(want["content"])) {
                why = "content " + ojson(m.content).dump() + " want " + want["content"].dump();
            } else if (trim_ws(m.reasoning) != trim_ws(want["reasoning_content"])) {
                why = "reasoning " + ojson(m.reasoning).dump() + " want " + want["reasoning_content"].dump();
            } else if (m.calls.size() != want["tool_calls"].size()) {
                why = "calls " + std::to_string(m.calls.size()) + " want " + want["tool_calls"].dump();
            } else {
                for (size_t i = 0; i < m.calls.size() && why.empty(); ++i) {
                    const ojson &wc = want["tool_calls"][i];
                    if (m.calls[i].name != wc["name"] || m.calls[i].id != wc["id"] ||
                        !same_arguments(m.calls[i].arguments, wc["arguments"])) {
                        why = "call " + std::to_string(i) + " " + m.calls[i].name + " " + m.calls[i].arguments +
                              " id " + m.calls[i].id + " want " + wc.dump();
                    }
                }
            }
        } catch (const llm::Error &e) {
            why = std::string("error: ") + e.what();
        }
        auto &pf = per_format[rec["format"].get<std::string>()];
        pf.second++;
        if (why.empty()) {
            passed++;
            pf.first++;
        } else {
            std::printf("  parse fails: %s (%s): %s\n", id.c_str(), rec["format"].get<std::string>().c_str(),
                        why.substr(0, 300).c_str());
        }
    }
    std::printf("chat parse vectors: %d/%zu pass\n", passed, vectors.size());
    for (const auto &[fmt, pt] : per_format) std::printf("  %s: %d/%d\n", fmt.c_str(), pt.first, pt.second);
    CHECK(passed == static_cast<int>(vectors.size()));
}

namespace {

// A C API string call with the size protocol: the status, and the text in *out.
template <typename F>
int32_t c_string(F &&call, std::string *out) {
    size_t len = 0;
    int32_t st = call(nullptr, 0, &len);
    if (st != LLM_ERR_BUFFER_TOO_SMALL) {
        *out = llm_last_error();
        return st;
    }
    std::string buf(len + 1, '\0');
    st = call(buf.data(), buf.size(), &len);
    *out = st == LLM_OK ? buf.substr(0, len) : std::string(llm_last_error());
    return st;
}

const char *const kHermes =
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{% if m.tool_calls %}{% for c in m.tool_calls %}"
    "<tool_call>\n{{ c.function|tojson }}\n</tool_call>{% endfor %}{% else %}{{ m.content }}{% endif %}"
    "<|im_end|>\n{% endfor %}{% if tools %}tools: {{ tools|tojson }}\n{% endif %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}";

}  // namespace

TEST_CASE("llm_chat_apply_template_json and llm_chat_parse through the C API", "[chat][tools]") {
    std::string out;
    const char *req = R"({"messages": [{"role": "user", "content": "Weather?"},
        {"role": "assistant", "content": null, "tool_calls": [{"type": "function",
         "function": {"name": "get", "arguments": {"city": "Paris"}}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "12C"}],
        "tools": [{"type": "function", "function": {"name": "get", "parameters": {"type": "object"}}}],
        "add_generation_prompt": true})";
    REQUIRE(c_string([&](char *b, size_t c,
                         size_t *l) { return llm_chat_apply_template_json(nullptr, kHermes, req, b, c, l); },
                     &out) == LLM_OK);
    CHECK(out ==
          "<|im_start|>user\nWeather?<|im_end|>\n<|im_start|>assistant\n<tool_call>\n"
          "{\"name\": \"get\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call><|im_end|>\n"
          "<|im_start|>tool\n12C<|im_end|>\ntools: [{\"type\": \"function\", \"function\": {\"name\": \"get\", "
          "\"parameters\": {\"type\": \"object\"}}}]\n<|im_start|>assistant\n");

    const char *raw = "Sure.<tool_call>\n{\"name\": \"get\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>";
    REQUIRE(
        c_string([&](char *b, size_t c, size_t *l) { return llm_chat_parse(nullptr, kHermes, raw, nullptr, b, c, l); },
                 &out) == LLM_OK);
    CHECK(
        out ==
        R"({"content":"Sure.","reasoning_content":"","tool_calls":[{"name":"get","arguments":"{\"city\":\"Oslo\"}","id":""}],"format":"hermes","parsed":true})");
    // an unknown template: the text is content, and the answer says so
    REQUIRE(
        c_string([&](char *b, size_t c,
                     size_t *l) { return llm_chat_parse(nullptr, "{{ messages }}", "hi <tool_call>", "{}", b, c, l); },
                 &out) == LLM_OK);
    CHECK(out ==
          R"({"content":"hi <tool_call>","reasoning_content":"","tool_calls":[],"format":"unknown","parsed":false})");
}

TEST_CASE("chat tools: bad and hostile input gets a status, never a crash", "[chat][tools][cpu-neutral]") {
    std::string out;
    auto render = [&](const std::string &req) {
        return c_string([&](char *b, size_t c,
                            size_t *l) { return llm_chat_apply_template_json(nullptr, kHermes, req.c_str(), b, c, l); },
                        &out);
    };
    auto parse = [&](const char *tmpl, const std::string &raw, const char *params) {
        return c_string(
            [&](char *b, size_t c, size_t *l) { return llm_chat_parse(nullptr, tmpl, raw.c_str(), params, b, c, l); },
            &out);
    };
    size_t len = 0;
    CHECK(llm_chat_apply_template_json(nullptr, nullptr, "{}", nullptr, 0, &len) == LLM_ERR_INVALID_ARGUMENT);
    CHECK(llm_chat_apply_template_json(nullptr, kHermes, nullptr, nullptr, 0, &len) == LLM_ERR_INVALID_ARGUMENT);
    CHECK(llm_chat_parse(nullptr, kHermes, nullptr, nullptr, nullptr, 0, &len) == LLM_ERR_INVALID_ARGUMENT);
    CHECK(render("{\"messages\": [") == LLM_ERR_INVALID_ARGUMENT);
    CHECK(out.find("not valid JSON") != std::string::npos);
    CHECK(render("[]") == LLM_ERR_INVALID_ARGUMENT);
    CHECK(render("{\"messages\": {}}") == LLM_ERR_INVALID_ARGUMENT);
    CHECK(render("{\"messages\": [1]}") == LLM_ERR_INVALID_ARGUMENT);
    CHECK(render("{\"messages\": [], \"tools\": 5}") == LLM_ERR_INVALID_ARGUMENT);
    CHECK(render("{\"messages\": [], \"add_generation_prompt\": \"yes\"}") == LLM_ERR_INVALID_ARGUMENT);
    // nesting past the interpreter's depth: refused, not a stack overflow
    const std::string deep = std::string(100000, '[') + std::string(100000, ']');
    CHECK(render("{\"messages\": [], \"tools\": " + deep + "}") != LLM_OK);
    CHECK(parse(kHermes, "x", "{\"reasoning_format\": \"maybe\"}") == LLM_ERR_INVALID_ARGUMENT);
    CHECK(parse(kHermes, "x", "{\"tools\": 3}") == LLM_ERR_INVALID_ARGUMENT);
    CHECK(parse(kHermes, "x", "{\"tool_choice\": \"always\"}") == LLM_ERR_INVALID_ARGUMENT);
    CHECK(out.find("tool_choice 'always'") != std::string::npos);
    CHECK(parse(kHermes, "x", "{\"tool_choice\": \"required\"}") == LLM_OK);
    CHECK(parse(kHermes, "x", "not json") == LLM_ERR_INVALID_ARGUMENT);
    CHECK(parse(kHermes, "\xff\xfe", nullptr) == LLM_ERR_INVALID_ARGUMENT);
    // hostile outputs on every format: deep nesting, unclosed markers, many markers; they parse
    // (into content or calls) in bounded time
    const ojson vectors = ojson::parse(read_file(kChatDir + "/parse/vectors.json"));
    std::map<std::string, std::string> sources;
    for (const auto &rec : vectors) {
        const std::string name = rec["template_file"];
        if (!sources.count(name)) sources[name] = read_file(kChatDir + "/templates/" + name);
    }
    // a stray closing brace inside a Gemma 4 array once looped forever (fuzz_chat_parse)
    const std::string gemma = read_file(kChatDir + "/templates/google-gemma-4-31B-it.jinja");
    CHECK(parse(gemma.c_str(), "<|tool_call>call:f{n:[1,{}a:ul}<tool_call|>", "{}") == LLM_OK);
    CHECK(out.find("\"tool_calls\":[]") != std::string::npos);
    const char *const kParams[] = {"{}", "{\"is_partial\": true}", "{\"reasoning_format\": \"none\"}"};
    size_t input = 0;  // counts the (template, input) pairs
    for (const auto &[name, src] : sources) {
        for (const std::string &raw :
             {std::string("<tool_call>") + deep, "[TOOL_CALLS]" + deep, "<|tool_call_start|>[f(a=" + deep + ")]",
              "<|tool_call>call:f{a:" + std::string(50000, '{'),
              "]<]minimax[>[<tool_call>" +
                  [] {
                      std::string s;
                      for (int i = 0; i < 2000; ++i) s += "]<]minimax[>[<a>";
                      return s;
                  }(),
              [] {
                  std::string s;
                  for (int i = 0; i < 20000; ++i) s += "<function=f><parameter=k>";
                  return s;
              }(),
              std::string(30000, '<') + "think>" + std::string(30000, '{')}) {
            // A slow build (sanitizers, qemu) takes one of the three parameter sets per input, in turn.
            const size_t only = input++ % 3;
            for (size_t p = 0; p < 3; ++p) {
                if (test::kSlowBuild && p != only) continue;
                INFO(name << " " << raw.substr(0, 40) << " " << kParams[p]);
                CHECK(parse(src.c_str(), raw, kParams[p]) == LLM_OK);
            }
        }
    }
}

TEST_CASE("chat parse: every prefix of a call on each format parses, partial or not", "[chat][tools][cpu-neutral]") {
    // An output cut anywhere (streaming, a token limit) must give a message, never an internal error.
    const ojson vectors = ojson::parse(read_file(kChatDir + "/parse/vectors.json"));
    std::map<std::string, const ojson *> one_per_format;  // the first case with a tool call
    for (const auto &rec : vectors) {
        if (!rec["expected"]["tool_calls"].empty() && !one_per_format.count(rec["format"]))
            one_per_format[rec["format"]] = &rec;
    }
    for (const auto &[format, rec] : one_per_format) {
        const std::string src = read_file(kChatDir + "/templates/" + (*rec)["template_file"].get<std::string>());
        const std::string raw = (*rec)["raw_output"];
        for (const bool partial : {false, true}) {
            ojson params = (*rec)["params"];
            params["is_partial"] = partial;
            const std::string pj = params.dump();
            for (size_t n = 0; n <= raw.size(); ++n) {
                const std::string cut = raw.substr(0, n);
                size_t len = 0;
                const int32_t st = llm_chat_parse(nullptr, src.c_str(), cut.c_str(), pj.c_str(), nullptr, 0, &len);
                INFO(format << " partial " << partial << " cut at " << n << ": " << llm_last_error());
                // the size query; a cut inside a UTF-8 sequence is refused as such
                CHECK((st == LLM_ERR_BUFFER_TOO_SMALL || st == LLM_ERR_INVALID_ARGUMENT));
                if (st == LLM_ERR_INVALID_ARGUMENT)
                    CHECK(std::string(llm_last_error()).find("UTF-8") != std::string::npos);
            }
        }
    }
}

TEST_CASE("chat parse: mutated outputs of every case parse into a message", "[chat][tools]") {
    // Cut, doubled and spliced outputs (a fixed-seed generator): a message or a UTF-8 refusal, never
    // an internal error or a crash.
    const ojson vectors = ojson::parse(read_file(kChatDir + "/parse/vectors.json"));
    std::map<std::string, std::string> sources;
    uint64_t state = 0x9E3779B97F4A7C15ull;
    auto next = [&](uint64_t n) {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        return n ? state % n : 0;
    };
    int parsed = 0;
    for (const auto &rec : vectors) {
        const std::string name = rec["template_file"];
        if (!sources.count(name)) sources[name] = read_file(kChatDir + "/templates/" + name);
        const std::string raw = rec["raw_output"];
        const std::string pj = rec["params"].dump();
        for (int k = 0; k < 6; ++k) {
            std::string m = raw;
            const size_t a = next(m.size() + 1), b = next(m.size() + 1);
            const size_t lo = std::min(a, b), hi = std::max(a, b);
            switch (k % 3) {
            case 0: m.erase(lo, hi - lo); break;                     // a piece gone
            case 1: m.insert(lo, raw.substr(lo, hi - lo)); break;    // a piece twice
            default: m = raw.substr(lo) + raw.substr(0, lo); break;  // rotated
            }
            size_t len = 0;
            const int32_t st = llm_chat_parse(nullptr, sources[name].c_str(), m.c_str(), pj.c_str(), nullptr, 0, &len);
            INFO(rec["id"].get<std::string>() << " mutation " << k << ": " << llm_last_error());
            CHECK((st == LLM_ERR_BUFFER_TOO_SMALL || st == LLM_ERR_INVALID_ARGUMENT));
            if (st == LLM_ERR_BUFFER_TOO_SMALL) parsed++;
        }
    }
    CHECK(parsed > 1000);
}
