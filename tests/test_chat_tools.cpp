// Tools in chat templates: every record of shared/chat/tools/vectors.json (the templates that read
// tools, rendered by Python's Jinja2 with tool definitions, assistant tool_calls, role "tool" results
// and documents) rendered by lib/jinja through the same path llm_chat_apply_template_json takes.
#include <catch2/catch.hpp>

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
                        why = "call " + std::to_string(i) + " " + m.calls[i].name + " " + m.calls[i].arguments + " id " +
                              m.calls[i].id + " want " + wc.dump();
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
