// llm-chat: an interactive chat on an instruct GGUF through the C API. Each turn renders the whole
// conversation with the model's chat template, keeps the tokens the session already holds (the
// longest common prefix of the new rendering and llm_session_tokens), evaluates only the rest, and
// streams the answer. Public API only: llm.h, linked against libllm like any host
// (examples/hosts/chat.c is the same loop in about 100 lines of C, without the prefix reuse).
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "common.h"

using namespace tools;

namespace {

const char *kUsage =
    "usage: llm-chat -m MODEL.gguf [options]\n"
    "  --system TEXT        a system message opening the conversation (kept by /reset)\n"
    "  --template FILE      a Jinja chat template instead of the model's own\n"
    "  -n N                 at most N tokens per answer (default 512)\n"
    "  --temp T             temperature, 0 = greedy (default 0.8)\n"
    "  --top-k K, --top-p P, --min-p P, --repeat-penalty R, --repeat-last-n N, --seed S\n"
    "  --presence-penalty P, --frequency-penalty F   llama.cpp's, over the --repeat-last-n window\n"
    "  --kv-type T          KV cache element type: f32 | f16 (default) | q8_0 (--kv-type-k/-v: one of them)\n"
    "  --ctx N              context length (default: model's, at most 4096)\n"
    "  -t N                 threads (default: physical cores)\n"
    "  --residency MODE     resident (default) | streamed | budget\n"
    "  --ram-budget SIZE    weight RAM for --residency budget: bytes or 64M, 1.5G (implies budget)\n"
    "  --stats-json FILE    append one JSON object per answer to FILE (tokens, counts, text)\n"
    "  --tools FILE.json    tool definitions ([{\"type\": \"function\", \"function\": {...}}]) shown to the\n"
    "                       model; each answer is parsed and its calls printed as one JSON line\n"
    "                       {\"tool_calls\": [{\"name\", \"arguments\", \"id\"}]}; /tool TEXT answers the last\n"
    "                       call with its result\n"
    "One user message per line; /reset forgets the conversation, /quit (or end of input) ends.\n"
    "Ctrl-C stops an answer; at the prompt it quits.\n";

struct Args {
    std::string model, system, template_file, stats_json, tools_file;
    int32_t n = 512, threads = 0, ctx = 0;
    int32_t residency = LLM_RESIDENCY_RESIDENT;
    uint64_t budget = 0;
    llm_session_params sp;
};

Args parse(int argc, char **argv) {
    Args a;
    llm_session_params_init(&a.sp, LLM_SESSION_PARAMS_VERSION);
    for (int i = 1; i < argc; ++i) {
        const std::string f = argv[i];
        auto val = [&]() -> const char * {
            if (i + 1 >= argc) die("missing value for " + f);
            return argv[++i];
        };
        if (f == "-h" || f == "--help") {
            std::fputs(kUsage, stdout);
            std::exit(0);
        } else if (f == "-m")
            a.model = val();
        else if (f == "--system")
            a.system = val();
        else if (f == "--template")
            a.template_file = val();
        else if (f == "-n")
            a.n = static_cast<int32_t>(parse_number("-n", val()));
        else if (parse_session_flag(f, val, a.sp))
            continue;
        else if (parse_residency_flag(f, val, a.residency, a.budget))
            continue;
        else if (f == "--ctx")
            a.ctx = static_cast<int32_t>(parse_number("--ctx", val()));
        else if (f == "-t")
            a.threads = static_cast<int32_t>(parse_number("-t", val()));
        else if (f == "--stats-json")
            a.stats_json = val();
        else if (f == "--tools")
            a.tools_file = val();
        else
            die("unknown flag '" + f + "' (see --help)");
    }
    if (a.model.empty()) die("no model given (-m MODEL.gguf); see --help");
    if (a.n <= 0) die("-n must be > 0");
    if (a.residency == LLM_RESIDENCY_BUDGET && a.budget == 0) die("--residency budget needs --ram-budget SIZE");
    return a;
}

// ---- Ctrl-C ---------------------------------------------------------------------------------------
// llm_session_cancel takes a mutex, which a signal handler must not: the handler only writes a byte
// to a pipe (async-signal-safe), and a thread reading the pipe does the rest.

int g_sigpipe[2] = {-1, -1};
std::atomic<bool> g_answering{false};

extern "C" void on_sigint(int) {
    const int saved = errno;
    const char b = 1;
    [[maybe_unused]] ssize_t r = write(g_sigpipe[1], &b, 1);
    errno = saved;
}

// While an answer runs, Ctrl-C cancels it; at the prompt it ends the program as Ctrl-C normally does.
void watch_sigint(llm_session *s) {
    char b;
    while (read(g_sigpipe[0], &b, 1) == 1) {
        if (g_answering.load()) {
            llm_session_cancel(s);
        } else {
            std::fputc('\n', stdout);
            std::fflush(stdout);
            std::signal(SIGINT, SIG_DFL);
            std::raise(SIGINT);
        }
    }
}

void install_sigint() {
    if (pipe(g_sigpipe) != 0) die("pipe() failed");
    fcntl(g_sigpipe[1], F_SETFL, O_NONBLOCK);  // a burst of Ctrl-C never blocks the handler
    struct sigaction sa {};
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGINT, &sa, nullptr);
}

// ---- one turn -------------------------------------------------------------------------------------

using ojson = nlohmann::ordered_json;

struct Message {
    std::string role, content;
    ojson extra = ojson::object();  // with --tools: tool_calls of an answer, tool_call_id/name of a result
};

// A C API string call with the size protocol (first the size, then the text).
template <typename F>
std::string call_string(F &&f, int32_t *st) {
    size_t len = 0;
    *st = f(nullptr, 0, &len);
    if (*st != LLM_ERR_BUFFER_TOO_SMALL) return {};
    std::string out(len + 1, '\0');
    *st = f(out.data(), out.size(), &len);
    out.resize(len);
    return out;
}

ojson messages_json(const std::vector<Message> &conv) {
    ojson msgs = ojson::array();
    for (const Message &c : conv) {
        ojson m = {{"role", c.role}, {"content", c.content}};
        for (auto it = c.extra.begin(); it != c.extra.end(); ++it) m[it.key()] = it.value();
        msgs.push_back(std::move(m));
    }
    return msgs;
}

std::string render(const llm_model *m, const std::string *tmpl, const std::vector<Message> &conv, const ojson &tools,
                   int32_t *st) {
    const char *t = tmpl ? tmpl->c_str() : nullptr;
    if (!tools.empty()) {  // the JSON form carries tools and tool calls
        const std::string req =
            ojson{{"messages", messages_json(conv)}, {"tools", tools}, {"add_generation_prompt", true}}.dump();
        return call_string(
            [&](char *buf, size_t cap, size_t *len) {
                return llm_chat_apply_template_json(m, t, req.c_str(), buf, cap, len);
            },
            st);
    }
    std::vector<llm_chat_message> msgs;
    for (const Message &c : conv) msgs.push_back({c.role.c_str(), c.content.c_str()});
    return call_string(
        [&](char *buf, size_t cap, size_t *len) {
            return llm_chat_apply_template(m, t, msgs.data(), msgs.size(), true, buf, cap, len);
        },
        st);
}

// With --tools: the answer parsed into content and calls (llm_chat_parse), printed when it has calls,
// and the assistant message the conversation keeps (calls with arguments as objects, as templates
// read them). conv holds the conversation the answer follows.
Message parse_answer(const llm_model *m, const std::string &tmpl, const std::vector<Message> &conv,
                     const ojson &tools, const std::string &reply) {
    const std::string params = ojson{{"tools", tools}, {"messages", messages_json(conv)}}.dump();
    int32_t st = LLM_OK;
    const std::string out = call_string(
        [&](char *buf, size_t cap, size_t *len) {
            return llm_chat_parse(m, tmpl.c_str(), reply.c_str(), params.c_str(), buf, cap, len);
        },
        &st);
    if (st != LLM_OK) {
        std::fprintf(stderr, "error: parsing the answer: %s: %s\n", llm_status_string(st), llm_last_error());
        return {"assistant", reply};
    }
    const ojson parsed = ojson::parse(out);
    Message msg{"assistant", parsed["content"].get<std::string>()};
    if (parsed["tool_calls"].empty()) return msg;
    std::printf("%s\n", ojson{{"tool_calls", parsed["tool_calls"]}}.dump().c_str());
    ojson calls = ojson::array();
    for (const auto &c : parsed["tool_calls"]) {
        ojson args = ojson::parse(c["arguments"].get<std::string>(), nullptr, false);
        if (args.is_discarded()) args = c["arguments"];
        ojson call = {{"type", "function"}, {"function", {{"name", c["name"]}, {"arguments", std::move(args)}}}};
        if (!c["id"].get<std::string>().empty()) call["id"] = c["id"];
        calls.push_back(std::move(call));
    }
    msg.extra["tool_calls"] = std::move(calls);
    return msg;
}

// A "/tool TEXT" result answers the latest call: its id and name go with it.
Message tool_result(const std::vector<Message> &conv, const std::string &text) {
    Message msg{"tool", text};
    for (auto it = conv.rbegin(); it != conv.rend(); ++it) {
        const auto calls = it->extra.find("tool_calls");
        if (calls == it->extra.end() || calls->empty()) continue;
        const ojson &last = calls->back();
        if (last.contains("id")) msg.extra["tool_call_id"] = last["id"];
        msg.extra["name"] = last["function"]["name"];
        break;
    }
    return msg;
}

struct Turn {
    int32_t status = LLM_OK;         // LLM_DONE at end-of-generation, LLM_OK at the limit, or an error
    std::string reply;               // as printed
    std::vector<int32_t> generated;  // the answer's tokens (an end-of-generation token not included)
    int32_t prompt_tokens = 0;       // the rendering's tokens
    int32_t reused = 0;              // of them, already in the session
    uint64_t evaluated = 0;          // prompt tokens the session evaluated this turn (its counter)
    uint64_t recomputed = 0;         // cached tokens evaluated again (a recurrent state's way back)
    double decode_seconds = 0;
};

llm_stats session_totals(const llm_session *s) {
    llm_stats t;
    llm_stats_init(&t, LLM_STATS_VERSION);
    check(llm_session_stats(s, &t, nullptr), "reading stats");
    return t;
}

// The stats JSON's kv_recomputed_tokens: tokens a session evaluated again to bring its cache back
// (a hybrid model's recurrent state after a truncation, from its newest checkpoint below).
uint64_t recomputed_tokens(llm_session *s) {
    const std::string j = llm_session_stats_json(s);
    const std::string key = "\"kv_recomputed_tokens\":";
    const size_t at = j.find(key);
    return at == std::string::npos ? 0 : std::strtoull(j.c_str() + at + key.size(), nullptr, 10);
}

// Prefills what the session lacks of `prompt`, then streams up to n tokens to stdout.
Turn answer(const llm_model *m, llm_session *s, const std::vector<int32_t> &prompt, int32_t n) {
    Turn t;
    t.prompt_tokens = static_cast<int32_t>(prompt.size());
    int32_t n_cached = 0;
    const int32_t st = llm_session_tokens(s, nullptr, 0, &n_cached);
    if (st != LLM_ERR_BUFFER_TOO_SMALL) check(st, "reading the session's tokens");
    std::vector<int32_t> cached(static_cast<size_t>(n_cached));
    check(llm_session_tokens(s, cached.data(), n_cached, &n_cached), "reading the session's tokens");
    size_t keep = 0;
    while (keep < cached.size() && keep < prompt.size() && cached[keep] == prompt[keep]) ++keep;
    // Sampling needs the logits of the prompt's last token: evaluate at least that one.
    if (keep == prompt.size() && keep > 0) --keep;
    t.reused = static_cast<int32_t>(keep);

    const llm_stats before = session_totals(s);
    const uint64_t recomputed_before = recomputed_tokens(s);
    g_answering.store(true);
    t.status = llm_session_truncate(s, static_cast<int32_t>(keep));
    if (t.status == LLM_OK) t.status = llm_session_prefill(s, prompt.data() + keep, prompt.size() - keep);
    std::string piece(256, '\0');
    for (int32_t i = 0; t.status == LLM_OK && i < n; ++i) {
        int32_t tok = -1;
        size_t len = 0;
        int32_t st = llm_session_next(s, &tok, piece.data(), piece.size(), &len);
        if (st == LLM_ERR_BUFFER_TOO_SMALL) {  // accepted all the same; fetch the long piece on its own
            piece.resize(len);
            st = llm_token_to_piece(m, tok, piece.data(), piece.size(), &len);
        }
        if (st != LLM_OK) {
            t.status = st;
            break;
        }
        t.generated.push_back(tok);
        t.reply.append(piece.data(), len);
        std::fwrite(piece.data(), 1, len, stdout);
        std::fflush(stdout);
    }
    g_answering.store(false);
    const llm_stats after = session_totals(s);
    t.evaluated = after.prompt_tokens - before.prompt_tokens;
    t.recomputed = recomputed_tokens(s) - recomputed_before;
    t.decode_seconds = after.decode_seconds - before.decode_seconds;
    return t;
}

void append_stats(const std::string &path, int turn, const Turn &t, int32_t n_past) {
    FILE *f = std::fopen(path.c_str(), "a");
    if (!f) die("cannot write '" + path + "'");
    std::fprintf(f,
                 "{\"turn\":%d,\"status\":\"%s\",\"prompt_tokens\":%d,\"reused_tokens\":%d,"
                 "\"evaluated_prompt_tokens\":%llu,\"recomputed_tokens\":%llu,\"n_past\":%d,\"reply\":\"%s\","
                 "\"tokens\":[",
                 turn,
                 t.status == LLM_DONE ? "done"
                 : t.status == LLM_OK ? "limit"
                                      : llm_status_string(t.status),
                 t.prompt_tokens, t.reused, static_cast<unsigned long long>(t.evaluated),
                 static_cast<unsigned long long>(t.recomputed), n_past,
                 json_escape(t.reply).c_str());
    for (size_t i = 0; i < t.generated.size(); ++i) std::fprintf(f, "%s%d", i ? "," : "", t.generated[i]);
    std::fprintf(f, "]}\n");
    if (std::fclose(f) != 0) die("write to '" + path + "' failed");
}

}  // namespace

int main(int argc, char **argv) {
    Args a = parse(argc, argv);
    const bool interactive = isatty(0);

    llm_model_params mp;
    llm_model_params_init(&mp, LLM_MODEL_PARAMS_VERSION);
    mp.n_threads = a.threads;
    mp.progress = progress_bar;
    mp.residency = a.residency;
    mp.ram_budget_bytes = a.budget;
    llm_model *model = nullptr;
    check(llm_model_load(a.model.c_str(), &mp, &model), "loading model");

    std::string tmpl;
    if (!a.template_file.empty()) {
        if (!read_file(a.template_file, &tmpl)) die("cannot read '" + a.template_file + "'");
    } else {
        size_t len = 0;
        int32_t st = llm_model_chat_template(model, nullptr, nullptr, 0, &len);
        if (st == LLM_ERR_NOT_FOUND) die("the model has no chat template; give one with --template FILE");
        if (st != LLM_ERR_BUFFER_TOO_SMALL) check(st, "reading the chat template");
        tmpl.assign(len + 1, '\0');
        check(llm_model_chat_template(model, nullptr, tmpl.data(), tmpl.size(), &len), "reading the chat template");
        tmpl.resize(len);
    }

    a.sp.n_ctx = a.ctx;
    a.sp.n_threads = a.threads;
    a.sp.parse_special = true;  // the rendering's special tokens are themselves (we tokenize it ourselves too)
    llm_session *s = nullptr;
    check(llm_session_create(model, &a.sp, &s), "creating session");
    install_sigint();
    std::thread watcher(watch_sigint, s);

    ojson tools = ojson::array();
    if (!a.tools_file.empty()) {
        std::string text;
        if (!read_file(a.tools_file, &text)) die("cannot read '" + a.tools_file + "'");
        tools = ojson::parse(text, nullptr, false);
        if (!tools.is_array()) die("'" + a.tools_file + "' must hold a JSON array of tool definitions");
    }

    std::vector<Message> conv;
    if (!a.system.empty()) conv.push_back({"system", a.system});
    const size_t n_fixed = conv.size();
    int turn = 0;
    std::string line;
    for (;;) {
        if (interactive) {
            std::fputs("> ", stdout);
            std::fflush(stdout);
        }
        if (!std::getline(std::cin, line)) break;
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (line.empty()) continue;
        if (line == "/quit") break;
        if (line == "/reset") {
            conv.resize(n_fixed);  // the cached tokens go at the next turn, past the common prefix
            if (interactive) std::fputs("[conversation reset]\n", stderr);
            continue;
        }

        if (!tools.empty() && line.rfind("/tool ", 0) == 0) conv.push_back(tool_result(conv, utf8_repair(line.substr(6))));
        else conv.push_back({"user", utf8_repair(line)});
        int32_t st = LLM_OK;
        const std::string prompt_text = render(model, &tmpl, conv, tools, &st);
        if (st != LLM_OK) {
            std::fprintf(stderr, "error: chat template: %s: %s\n", llm_status_string(st), llm_last_error());
            conv.pop_back();
            continue;
        }
        const std::vector<int32_t> prompt = tokenize(model, prompt_text, true, true);
        const Turn t = answer(model, s, prompt, a.n);
        std::fputc('\n', stdout);
        std::fflush(stdout);
        ++turn;
        if (t.status == LLM_ERR_CANCELLED) {
            std::fputs("[answer stopped]\n", stderr);
        } else if (t.status < 0) {
            std::fprintf(stderr, "error: %s: %s%s\n", llm_status_string(t.status), llm_session_last_error(s),
                         t.status == LLM_ERR_CONTEXT_FULL ? " (/reset starts over)" : "");
        }
        if (t.status < 0 && t.generated.empty()) {  // nothing was said: the question is withdrawn
            conv.pop_back();
            continue;
        }
        // The answer joins the conversation as text (what a template renders); a random model's bytes
        // may not be UTF-8, which a template may not be given.
        if (tools.empty()) conv.push_back({"assistant", utf8_repair(t.reply)});
        else conv.push_back(parse_answer(model, tmpl, conv, tools, utf8_repair(t.reply)));
        std::fprintf(stderr, "[%llu prompt tokens, %zu tokens, %.1f tok/s]\n",
                     static_cast<unsigned long long>(t.evaluated), t.generated.size(),
                     t.decode_seconds > 0 ? static_cast<double>(t.generated.size()) / t.decode_seconds : 0.0);
        if (!a.stats_json.empty()) append_stats(a.stats_json, turn, t, llm_session_n_past(s));
    }
    if (interactive) std::fputc('\n', stdout);
    std::fflush(stdout);
    // Ctrl-C's default action from here on; closing the pipe ends the watcher before the session goes.
    std::signal(SIGINT, SIG_DFL);
    close(g_sigpipe[1]);
    watcher.join();
    llm_session_free(s);
    llm_model_free(model);
    return 0;
}
