// Errors inside the core are exceptions carrying an llm status; the C shims in api/ turn them into a
// status return plus llm_last_error(). Nothing below api/ ever sees the C error protocol.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

#include <spdlog/fmt/fmt.h>

#include "llm.h"

namespace llm {

class Error : public std::runtime_error {
public:
    Error(int32_t status, const std::string &msg) : std::runtime_error(msg), status_(status) {}
    int32_t status() const noexcept { return status_; }

private:
    int32_t status_;
};

// A static, never-NULL name for an LLM_* status; llm_status_string() returns it to hosts.
const char *status_string(int32_t status) noexcept;

template <typename... Args>
[[noreturn]] void fail(int32_t status, fmt::format_string<Args...> f, Args &&...args) {
    throw Error(status, fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace llm
