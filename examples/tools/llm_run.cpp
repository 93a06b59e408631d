// llm-run: generate text from a GGUF model. Public API only: llm.h (helpers in common.h), linked
// against libllm like any host.
#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "common.h"

using namespace tools;

namespace {

const char *kUsage =
    "usage: llm-run -m MODEL.gguf [-p PROMPT | -f FILE | --tokens 1,2,3] [options]   (no prompt: --load-state)\n"
    "  -f FILE              read the prompt from FILE (exactly its bytes)\n"
    "  --parse-special      special-token text in the prompt (\"<|im_start|>\") becomes those tokens,\n"
    "                       e.g. for a rendered chat template (see llm-template)\n"
    "  -n N                 tokens to generate (default 64)\n"
    "  --temp T             temperature, 0 = greedy (default 0.8)\n"
    "  --top-k K, --top-p P, --min-p P, --repeat-penalty R, --repeat-last-n N, --seed S\n"
    "  --presence-penalty P, --frequency-penalty F   llama.cpp's, over the --repeat-last-n window\n"
    "  -t N                 threads (default: physical cores)\n"
    "  --ctx N              context length (default: model's, at most 4096)\n"
    "  --residency MODE     resident (default) | streamed | budget\n"
    "  --ram-budget SIZE    weight RAM for --residency budget: bytes or 64M, 1.5G (implies budget)\n"
    "  --prefetch N         blocks read ahead while one computes (default 1; 0 = synchronous)\n"
    "  --page-cache P       keep (default) | drop | direct | map: what weight reads leave in the OS page\n"
    "                       cache (map: streamed weights are mapped from the file, not copied)\n"
    "  --context-shift      when the context is full, drop the oldest tokens after --keep N and go on\n"
    "  --keep N             tokens context shift never drops (default 0)\n"
    "  --save-state FILE    save the session (tokens, KV cache, sampler) after the run\n"
    "  --load-state FILE    continue a saved session: the prompt (may be -p \"\") follows it; the RNG\n"
    "                       comes from the file, the sampling parameters from this command line\n"
    "  --kv-type T          KV cache element type for keys and values: f32 | f16 (default) | q8_0\n"
    "  --kv-type-k T, --kv-type-v T   the same for keys or values only\n"
    "  --ignore-eos         generate exactly -n tokens: when the sampler picks an end-of-generation\n"
    "                       token, the most likely other token is taken instead\n"
    "  --dump-logits FILE   raw f32 logits of every evaluated position\n"
    "  --grammar-file F     sample only text of the GBNF grammar in F (llm_session_set_grammar)\n"
    "  --grammar-root NAME  its start rule (default: root)\n"
    "  --json-schema F      sample only JSON that the JSON schema in F accepts (llm_session_set_json_schema)\n"
    "  --stop S             end generation at the text S (repeatable; llm_session_set_stop): S is\n"
    "                       not printed and not left in the context\n"
    "  --logprobs N         each sampled token's log-probability and the N most likely (0..256;\n"
    "                       llm_session_set_logprobs): in --json as \"logprobs\", else on stderr\n"
    "  --json               one JSON object with the result and speeds on stdout\n"
    "more than one token per pass (the stats line and --json add passes, drafted, accepted,\n"
    "tokens_per_pass = generated / decode passes, acceptance = accepted / drafted):\n";

struct Args {
    std::string model, prompt, dump, save_state, load_state, grammar_file, grammar_root, json_schema;
    std::vector<int32_t> tokens;
    std::vector<std::string> stops;
    bool have_prompt = false, have_tokens = false, json = false, ignore_eos = false, parse_special = false;
    int32_t n = 64, threads = 0, ctx = 0, logprobs = -1;
    int32_t residency = LLM_RESIDENCY_RESIDENT, prefetch = 1, page_cache = LLM_PAGE_CACHE_KEEP;
    uint64_t budget = 0;
    llm_session_params sp;
    SpecFlags spec;
};

Args parse(int argc, char **argv) {
    Args a;
    llm_session_params_init(&a.sp, LLM_SESSION_PARAMS_VERSION);
    for (int i = 1; i < argc; ++i) {
        std::string f = argv[i];
        auto val = [&]() -> const char * {
            if (i + 1 >= argc) die("missing value for " + f);
            return argv[++i];
        };
        if (f == "-h" || f == "--help") {
            std::fputs(kUsage, stdout);
            std::fputs(kSpecUsage, stdout);
            std::exit(0);
        } else if (f == "-m")
            a.model = val();
        else if (f == "-p") {
            a.prompt = val();
            a.have_prompt = true;
        } else if (f == "-f") {
            const std::string path = val();
            if (!read_file(path, &a.prompt)) die("cannot read '" + path + "'");
            a.have_prompt = true;
        } else if (f == "--parse-special")
            a.parse_special = true;
        else if (f == "--tokens") {
            std::string s = val();
            size_t pos = 0;
            while (pos <= s.size()) {
                size_t comma = s.find(',', pos);
                std::string t = s.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
                a.tokens.push_back(static_cast<int32_t>(parse_number("--tokens", t.c_str())));
                if (comma == std::string::npos) break;
                pos = comma + 1;
            }
            a.have_tokens = true;
        } else if (f == "-n")
            a.n = static_cast<int32_t>(parse_number("-n", val()));
        else if (parse_session_flag(f, val, a.sp))
            continue;
        else if (parse_residency_flag(f, val, a.residency, a.budget))
            continue;
        else if (parse_spec_flag(f, val, a.spec))
            continue;
        else if (f == "-t")
            a.threads = static_cast<int32_t>(parse_number("-t", val()));
        else if (f == "--ctx")
            a.ctx = static_cast<int32_t>(parse_number("--ctx", val()));
        else if (f == "--dump-logits")
            a.dump = val();
        else if (f == "--logprobs")
            a.logprobs = static_cast<int32_t>(parse_number("--logprobs", val()));
        else if (f == "--stop")
            a.stops.push_back(val());
        else if (f == "--grammar-file")
            a.grammar_file = val();
        else if (f == "--grammar-root")
            a.grammar_root = val();
        else if (f == "--json-schema")
            a.json_schema = val();
        else if (f == "--context-shift")
            a.sp.context_shift = true;
        else if (f == "--keep")
            a.sp.n_keep = static_cast<int32_t>(parse_number("--keep", val()));
        else if (f == "--save-state")
            a.save_state = val();
        else if (f == "--load-state")
            a.load_state = val();
        else if (f == "--ignore-eos")
            a.ignore_eos = true;
        else if (f == "--json")
            a.json = true;
        else if (f == "--prefetch")
            a.prefetch = static_cast<int32_t>(parse_number("--prefetch", val()));
        else if (f == "--page-cache") {
            a.page_cache = parse_page_cache(val());
            if (a.page_cache < 0) die("--page-cache takes keep, drop, direct or map");
        } else
            die("unknown flag '" + f + "' (see --help)");
    }
    if (a.model.empty()) die("no model given (-m MODEL.gguf); see --help");
    if (a.have_prompt && a.have_tokens) die("give one of -p PROMPT, -f FILE or --tokens LIST, not both");
    if (!a.have_prompt && !a.have_tokens && a.load_state.empty()) die("give -p PROMPT, -f FILE or --tokens LIST");
    if (a.n < 0) die("-n must be >= 0");
    if (a.residency == LLM_RESIDENCY_BUDGET && a.budget == 0) die("--residency budget needs --ram-budget SIZE");
    if (single("--parallel", a.spec.parallel) > 1 &&
        (!a.dump.empty() || !a.save_state.empty() || !a.load_state.empty()))
        die("--parallel does not combine with --dump-logits, --save-state or --load-state");
    single("--draft-n", a.spec.n_draft);
    single("--lookup", a.spec.lookup);
    return a;
}

}  // namespace

int main(int argc, char **argv) {
    Args a = parse(argc, argv);

    llm_model_params mp;
    llm_model_params_init(&mp, LLM_MODEL_PARAMS_VERSION);
    mp.n_threads = a.threads;
    mp.progress = progress_bar;
    mp.residency = a.residency;
    mp.ram_budget_bytes = a.budget;
    mp.prefetch_depth = a.prefetch;
    mp.page_cache = a.page_cache;
    const auto t_load = std::chrono::steady_clock::now();
    llm_model *model = nullptr;
    check(llm_model_load(a.model.c_str(), &mp, &model), "loading model");
    const double load_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_load).count();

    a.sp.n_ctx = a.ctx;
    a.sp.n_threads = a.threads;
    a.sp.logits_all = !a.dump.empty();
    a.sp.parse_special = a.parse_special;
    llm_session *s = nullptr;
    check(llm_session_create(model, &a.sp, &s), "creating session");
    if (!a.load_state.empty()) check(llm_session_load(s, a.load_state.c_str()), "loading the saved session");

    // A loaded session goes on from its context: its prompt gets no BOS and may be empty.
    const bool bos = llm_session_n_past(s) == 0;
    std::vector<int32_t> prompt = a.tokens;
    if (a.have_prompt) prompt = tokenize(model, a.prompt, bos, a.parse_special);
    if (prompt.empty() && bos) die("the prompt is empty");

    FILE *dump = nullptr;
    if (!a.dump.empty() && !(dump = std::fopen(a.dump.c_str(), "wb"))) die("cannot write '" + a.dump + "'");
    auto dump_row = [&](int32_t i) {
        const float *lg;
        int32_t nv;
        check(llm_session_logits_ith(s, i, &lg, &nv), "reading logits");
        if (std::fwrite(lg, sizeof(float), nv, dump) != static_cast<size_t>(nv))
            die("write to '" + a.dump + "' failed");
    };

    if (!prompt.empty()) check(llm_session_prefill(s, prompt.data(), prompt.size()), "prefill");
    if (dump)
        for (size_t i = 0; i < prompt.size(); ++i) dump_row(static_cast<int32_t>(i));

    // --parallel N: N - 1 more sessions of the same prompt, advanced with s in one pass per token.
    const int32_t n_par = single("--parallel", a.spec.parallel);
    std::vector<llm_session *> sessions = {s};
    for (int32_t i = 1; i < n_par; ++i) {
        llm_session *o = nullptr;
        check(llm_session_create(model, &a.sp, &o), "creating session");
        check(llm_session_prefill(o, prompt.data(), prompt.size()), "prefill");
        sessions.push_back(o);
    }
    llm_model *draft = load_draft(a.spec, a.threads, a.prefetch);
    bool spec_on = false;
    for (llm_session *x : sessions)
        spec_on = set_speculation(x, draft, single("--draft-n", a.spec.n_draft), single("--lookup", a.spec.lookup),
                                  a.spec.p_min);
    llm_model_free(draft);  // the sessions keep their reference
    if (!a.grammar_file.empty()) {
        std::string gbnf;
        if (!read_file(a.grammar_file, &gbnf)) die("cannot read '" + a.grammar_file + "'");
        for (llm_session *x : sessions)
            check(llm_session_set_grammar(x, gbnf.c_str(), a.grammar_root.c_str()), "setting the grammar");
    }
    if (!a.json_schema.empty()) {
        if (!a.grammar_file.empty()) die("--grammar-file and --json-schema do not combine");
        std::string schema;
        if (!read_file(a.json_schema, &schema)) die("cannot read '" + a.json_schema + "'");
        for (llm_session *x : sessions) check(llm_session_set_json_schema(x, schema.c_str()), "setting the JSON schema");
    }

    if (!a.stops.empty()) {
        if (n_par > 1) die("--stop does not combine with --parallel (batched passes hand out no text)");
        std::vector<const char *> list;
        for (const std::string &x : a.stops) list.push_back(x.c_str());
        check(llm_session_set_stop(s, list.data(), list.size()), "setting the stop strings");
    }

    // --logprobs: one JSON object per sampled token, collected by the callback.
    std::vector<std::string> logprob_lines;
    if (a.logprobs >= 0) {
        if (n_par > 1) die("--logprobs does not combine with --parallel");
        llm_logprobs_params lp;
        llm_logprobs_params_init(&lp, LLM_LOGPROBS_PARAMS_VERSION);
        lp.n_top = a.logprobs;
        lp.user = &logprob_lines;
        lp.on_token = [](int32_t token, float logprob, const llm_token_logprob *top, int32_t n_top, void *user) {
            char num[64];
            std::snprintf(num, sizeof num, "{\"token\":%d,\"logprob\":%.6g,\"top\":[", token, logprob);
            std::string line = num;
            for (int32_t i = 0; i < n_top; ++i) {
                std::snprintf(num, sizeof num, "%s{\"token\":%d,\"logprob\":%.6g}", i ? "," : "", top[i].token,
                              top[i].logprob);
                line += num;
            }
            static_cast<std::vector<std::string> *>(user)->push_back(line + "]}");
        };
        check(llm_session_set_logprobs(s, &lp), "turning on log-probabilities");
    }

    // The decode counters are the difference of the totals around the loop.
    std::vector<llm_stats> before(sessions.size()), after(sessions.size());
    for (size_t i = 0; i < sessions.size(); ++i) {
        llm_stats_init(&before[i], LLM_STATS_VERSION);
        llm_stats_init(&after[i], LLM_STATS_VERSION);
        check(llm_session_stats(sessions[i], &before[i], nullptr), "stats");
    }

    std::vector<std::string> texts(sessions.size());
    std::vector<std::vector<int32_t>> gens(sessions.size());
    char piece[256];
    // The token that replaces an end-of-generation one under --ignore-eos; -1 ends the session.
    auto after_eog = [&](llm_session *x) {
        if (!a.ignore_eos) return -1;
        const float *lg;
        int32_t nv;
        check(llm_session_logits(x, &lg, &nv), "reading logits");
        const int32_t t = best_non_eog(model, lg, nv);
        if (t < 0) die("--ignore-eos: every token ends generation");
        return t;
    };
    auto print = [&](size_t k, const char *text, size_t len) {
        texts[k].append(text, len);
        if (!a.json && n_par == 1) {
            std::fwrite(text, 1, len, stdout);
            std::fflush(stdout);
        }
    };
    auto emit = [&](size_t k, int32_t tok) {
        gens[k].push_back(tok);
        size_t len = 0;
        check(llm_token_to_piece(model, tok, piece, sizeof piece, &len), "detokenizing");
        print(k, piece, len);
    };
    // Why the single session's generation ended: "length" (-n), "eog" or "stop" (a stop string).
    std::string finish = "length";
    // With stop strings the text is what llm_session_next hands out (held back near a possible stop
    // string), not each token's piece.
    // What one step hands out is at most a held tail shorter than the longest stop string plus a piece.
    size_t stop_bytes = 0;
    for (const std::string &x : a.stops) stop_bytes += x.size();
    std::string text_out(1024 + stop_bytes, '\0');
    auto pull = [&](int32_t *tok) {
        size_t len = 0;
        const int32_t st = llm_session_next(s, tok, text_out.data(), text_out.size(), &len);
        if (st >= 0) print(0, text_out.data(), len);
        return st;
    };
    uint64_t batch_passes = 0;  // --parallel: passes counted here (each session counts each pass it took part in)
    const auto t_decode = std::chrono::steady_clock::now();
    if (n_par == 1) {
        for (int32_t i = 0; i < a.n; ++i) {
            int32_t tok;
            if (!a.stops.empty()) {
                const int32_t st = pull(&tok);
                if (st == LLM_STOPPED) {
                    finish = "stop";
                    break;
                }
                if (st == LLM_DONE) {
                    if ((tok = after_eog(s)) < 0) {
                        finish = "eog";
                        break;
                    }
                    check(llm_session_accept(s, tok), "decode");
                    emit(0, tok);
                } else {
                    check(st, "decode");
                    gens[0].push_back(tok);
                }
                if (dump) dump_row(0);
                continue;
            }
            if (spec_on) {
                // Speculation works inside llm_session_next: one call hands out one token, a pass
                // may have produced several.
                const int32_t st = llm_session_next(s, &tok, nullptr, 0, nullptr);
                if (st == LLM_DONE) {
                    if ((tok = after_eog(s)) < 0) {
                        finish = "eog";
                        break;
                    }
                    check(llm_session_accept(s, tok), "decode");
                } else
                    check(st, "decode");
            } else {
                check(llm_session_sample(s, &tok), "sampling");
                if (llm_model_token_is_eog(model, tok) && (tok = after_eog(s)) < 0) {
                    finish = "eog";
                    break;
                }
                check(llm_session_accept(s, tok), "decode");
            }
            if (dump) dump_row(0);
            emit(0, tok);
        }
    } else {
        std::vector<size_t> live(sessions.size());
        for (size_t k = 0; k < live.size(); ++k) live[k] = k;
        std::vector<llm_session *> batch;
        std::vector<int32_t> toks, sts;
        for (int32_t i = 0; i < a.n && !live.empty(); ++i) {
            batch.clear();
            for (size_t k : live) batch.push_back(sessions[k]);
            toks.assign(batch.size(), -1);
            sts.assign(batch.size(), 0);
            check(llm_session_next_batch(batch.data(), static_cast<int32_t>(batch.size()), toks.data(), sts.data()),
                  "batched decode");
            ++batch_passes;
            std::vector<size_t> still;
            for (size_t j = 0; j < live.size(); ++j) {
                const size_t k = live[j];
                int32_t tok = toks[j];
                if (sts[j] == LLM_DONE) {
                    if ((tok = after_eog(sessions[k])) < 0) continue;
                    check(llm_session_accept(sessions[k], tok), "decode");
                    ++batch_passes;
                } else if (sts[j] != LLM_OK) {
                    die("batched decode: session " + std::to_string(k) + ": " + llm_status_string(sts[j]) + ": " +
                        llm_session_last_error(sessions[k]));
                }
                emit(k, tok);
                still.push_back(k);
            }
            live = still;
        }
    }
    if (!a.stops.empty() && finish == "length") {
        // -n reached: the text held back as a possible start of a stop string is output after all.
        size_t len = 0;
        check(llm_session_flush_held(s, text_out.data(), text_out.size(), &len), "flushing the held text");
        print(0, text_out.data(), len);
    }
    const double decode_wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_decode).count();
    uint64_t passes = 0, drafted = 0, accepted = 0, n_gen = 0;
    for (size_t i = 0; i < sessions.size(); ++i) {
        check(llm_session_stats(sessions[i], &after[i], nullptr), "stats");
        passes += after[i].passes - before[i].passes;
        drafted += after[i].drafted_tokens - before[i].drafted_tokens;
        accepted += after[i].accepted_tokens - before[i].accepted_tokens;
        n_gen += gens[i].size();
    }
    if (n_par > 1) passes = batch_passes;
    const double per_pass = passes ? static_cast<double>(n_gen) / static_cast<double>(passes) : 0.0;
    const double acceptance = drafted ? static_cast<double>(accepted) / static_cast<double>(drafted) : 0.0;
    const std::string &text = texts[0];
    const std::vector<int32_t> &generated = gens[0];
    if (dump && std::fclose(dump) != 0) die("write to '" + a.dump + "' failed");
    if (!a.save_state.empty()) check(llm_session_save(s, a.save_state.c_str()), "saving the session");

    // The library's own counters: evaluation time only, not sampling or printing. With --parallel,
    // decode speed is the aggregate: every session's tokens over the decode loop's wall time.
    std::string stats = llm_session_stats_json(s);
    auto field = [&](const char *key) {
        size_t p = stats.find(std::string("\"") + key + "\":");
        return p == std::string::npos ? 0.0 : std::strtod(stats.c_str() + p + std::strlen(key) + 3, nullptr);
    };
    const double pf = field("prefill_tok_s");
    const double dc =
        n_par > 1 ? (decode_wall > 0 ? static_cast<double>(n_gen) / decode_wall : 0.0) : field("decode_tok_s");
    const uint64_t rss = peak_rss_bytes();
    if (a.json) {
        std::printf(
            "{\"model\":\"%s\",\"prompt_tokens\":%zu,\"generated_tokens\":%zu,\"text\":\"%s\","
            "\"prefill_tok_s\":%.3f,\"decode_tok_s\":%.3f,\"load_s\":%.4f,\"peak_rss_bytes\":%llu,"
            "\"passes\":%llu,\"drafted\":%llu,\"accepted\":%llu,\"tokens_per_pass\":%.4f,"
            "\"acceptance\":%.4f,\"parallel\":%d,\"finish\":\"%s\",\"stats\":%s,\"tokens\":[",
            json_escape(a.model).c_str(), prompt.size(), generated.size(), json_escape(text).c_str(), pf, dc, load_s,
            static_cast<unsigned long long>(rss), static_cast<unsigned long long>(passes),
            static_cast<unsigned long long>(drafted), static_cast<unsigned long long>(accepted), per_pass, acceptance,
            n_par, finish.c_str(), stats.c_str());
        for (size_t i = 0; i < generated.size(); ++i) std::printf("%s%d", i ? "," : "", generated[i]);
        std::printf("],\"prompt_ids\":[");
        for (size_t i = 0; i < prompt.size(); ++i) std::printf("%s%d", i ? "," : "", prompt[i]);
        std::printf("]");
        if (a.logprobs >= 0) {
            std::printf(",\"logprobs\":[");
            for (size_t i = 0; i < logprob_lines.size(); ++i)
                std::printf("%s%s", i ? "," : "", logprob_lines[i].c_str());
            std::printf("]");
        }
        if (n_par > 1) {
            std::printf(",\"sessions\":[");
            for (size_t k = 0; k < sessions.size(); ++k) {
                std::printf("%s{\"text\":\"%s\",\"tokens\":[", k ? "," : "", json_escape(texts[k]).c_str());
                for (size_t i = 0; i < gens[k].size(); ++i) std::printf("%s%d", i ? "," : "", gens[k][i]);
                std::printf("]}");
            }
            std::printf("]");
        }
        std::printf("}\n");
    } else {
        for (size_t k = 0; n_par > 1 && k < sessions.size(); ++k)
            std::printf("[session %zu] %s\n", k, texts[k].c_str());
        // The text goes to stdout, the stats to stderr: end the text's line and flush it first, or a
        // terminal shows the stats glued to the last word.
        if (n_par == 1) std::fputc('\n', stdout);
        std::fflush(stdout);
        for (const std::string &l : logprob_lines) std::fprintf(stderr, "%s\n", l.c_str());
        std::fprintf(stderr,
                     "prompt %zu tokens, %.1f tok/s | generated %llu tokens, %.1f tok/s%s | passes %llu, "
                     "%.2f tokens/pass, drafted %llu, accepted %llu (%.0f%%) | load %.3f s | peak RSS %.1f MiB\n",
                     prompt.size(), pf, static_cast<unsigned long long>(n_gen), dc, n_par > 1 ? " (all sessions)" : "",
                     static_cast<unsigned long long>(passes), per_pass, static_cast<unsigned long long>(drafted),
                     static_cast<unsigned long long>(accepted), acceptance * 100.0, load_s, rss / 1048576.0);
    }
    for (size_t i = 1; i < sessions.size(); ++i) llm_session_free(sessions[i]);
    llm_session_free(s);
    llm_model_free(model);
    return 0;
}
