// The library's own spdlog logger. Never registered in spdlog's global registry, so a host that also
// uses spdlog keeps its loggers and we keep ours. Its only sink forwards to the host's callback (or to
// stderr by default).
#pragma once

#include <spdlog/logger.h>

#include "llm.h"

namespace llm {

spdlog::logger &log();
void set_log_callback(llm_log_cb cb, void *user);
void set_log_level(int32_t level);

}  // namespace llm
