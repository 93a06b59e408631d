// Errors inside the core are exceptions carrying an llm status; the C shims in api/ turn them into a
// status return plus llm_last_error(). Nothing below api/ ever sees the C error protocol.
// status_of() is the one place a C++ exception becomes a status: every boundary that must not let an
// exception through (the C API's guard, a batch's per-session statuses, jinja::render) asks it.
#pragma once

#include <cstdint>
#include <exception>
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

// The status an exception stands for, and (if message is not null) its message: an Error's own status
// and text; std::bad_alloc is LLM_ERR_OUT_OF_MEMORY; any other exception is LLM_ERR_INTERNAL (a bug:
// the message says so). A null e is LLM_OK. Never throws (a message that cannot be stored is cleared).
int32_t status_of(std::exception_ptr e, std::string *message = nullptr) noexcept;

template <typename... Args>
[[noreturn]] void fail(int32_t status, fmt::format_string<Args...> f, Args &&...args) {
    throw Error(status, fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace llm
