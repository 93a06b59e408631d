// Every extern "C" body runs through guard(): C++ exceptions become a status code plus a
// thread-local message for llm_last_error(). Nothing throws across the C boundary.
#pragma once

#include <new>
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
    } catch (const Error &e) {
        set_last_error(e.what());
        return e.status();
    } catch (const std::bad_alloc &) {
        set_last_error("out of memory");
        return LLM_ERR_OUT_OF_MEMORY;
    } catch (const std::exception &e) {
        set_last_error(std::string("internal error: ") + e.what());
        return LLM_ERR_INTERNAL;
    } catch (...) {
        set_last_error("internal error: unknown exception");
        return LLM_ERR_INTERNAL;
    }
}

}  // namespace llm
