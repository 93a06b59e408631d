#include "core/log.h"

#include <cstdio>
#include <memory>
#include <mutex>

#include <spdlog/sinks/base_sink.h>

namespace llm {
namespace {

int32_t to_llm_level(spdlog::level::level_enum l) {
    switch (l) {
    case spdlog::level::trace:
    case spdlog::level::debug: return LLM_LOG_DEBUG;
    case spdlog::level::info: return LLM_LOG_INFO;
    case spdlog::level::warn: return LLM_LOG_WARN;
    default: return LLM_LOG_ERROR;
    }
}

// Forwards each formatted line to the host callback, or prints it to stderr when none is set.
class CallbackSink final : public spdlog::sinks::base_sink<std::mutex> {
public:
    void set(llm_log_cb cb, void *user) {
        std::lock_guard<std::mutex> lock(mutex_);
        cb_ = cb;
        user_ = user;
    }

protected:
    void sink_it_(const spdlog::details::log_msg &msg) override {
        std::string text(msg.payload.data(), msg.payload.size());
        if (cb_) {
            cb_(to_llm_level(msg.level), text.c_str(), user_);
        } else {
            std::fprintf(stderr, "libllm: %s\n", text.c_str());
        }
    }
    void flush_() override {}

private:
    llm_log_cb cb_ = nullptr;
    void *user_ = nullptr;
};

struct State {
    std::shared_ptr<CallbackSink> sink = std::make_shared<CallbackSink>();
    spdlog::logger logger{"libllm", sink};
    State() { logger.set_level(spdlog::level::warn); }
};

State &state() {
    static State s;
    return s;
}

}  // namespace

spdlog::logger &log() { return state().logger; }

void set_log_callback(llm_log_cb cb, void *user) { state().sink->set(cb, user); }

void set_log_level(int32_t level) {
    spdlog::level::level_enum l = spdlog::level::off;
    switch (level) {
    case LLM_LOG_DEBUG: l = spdlog::level::debug; break;
    case LLM_LOG_INFO: l = spdlog::level::info; break;
    case LLM_LOG_WARN: l = spdlog::level::warn; break;
    case LLM_LOG_ERROR: l = spdlog::level::err; break;
    default: l = spdlog::level::off; break;
    }
    state().logger.set_level(l);
}

}  // namespace llm
