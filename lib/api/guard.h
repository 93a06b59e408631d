// Every extern "C" body runs through guard(): a C++ exception becomes a status code (status_of(),
// core/error.h) plus a thread-local message for llm_last_error(). Nothing throws across the C boundary.
#pragma once

#include <exception>
#include <string>
#include <utility>

#include "core/error.h"
#include "core/log.h"

namespace llm {

void set_last_error(const std::string &msg);
void clear_last_error();

template <typename F>
int32_t guard(F &&f) noexcept {
    try {
        return std::forward<F>(f)();
    } catch (...) {
        std::string msg;
        const int32_t status = status_of(std::current_exception(), &msg);
        set_last_error(msg);
        return status;
    }
}

}  // namespace llm
