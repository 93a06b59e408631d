// Saved sessions: the byte format of a session's state, where it is written, and the file protocol
// (a temporary file renamed over the old one). Session::save / Session::load (session_state.cpp)
// write and read it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "core/hash.h"
#include "llm.h"

namespace llm {

class Session;

// The state format's version. A file of a newer version is refused (LLM_ERR_FORMAT); older ones stay
// readable as the format grows.
// Version 2 added the recurrent layers' state (an attention-only model's state differs from version
// 1 only by its two header fields, and version 1 states still load).
constexpr uint32_t kStateFormatVersion = 2;

// Where a saved state goes: every byte passes through write(), which keeps the running checksum.
class StateSink {
public:
    virtual ~StateSink() = default;
    void write(const void *data, uint64_t n) {
        hash_.add(data, static_cast<size_t>(n));
        if (n) do_write(data, n);
    }
    uint64_t checksum() const { return hash_.value(); }

protected:
    // Takes all n bytes or throws Error.
    virtual void do_write(const void *data, uint64_t n) = 0;

private:
    Fnv1a64 hash_;
};

// The host's llm_writer (checked: version known, write set; else LLM_ERR_INVALID_ARGUMENT). A write
// returning a status other than LLM_OK fails the save with that status.
std::unique_ptr<StateSink> writer_sink(const llm_writer &w);

// Writes the state to `path.tmp-<pid>` beside path and renames it over path once complete and
// flushed, so a kill or failure mid-save leaves the old file.
void save_state_file(const Session &s, const std::string &path);
void load_state_file(Session &s, const std::string &path);

}  // namespace llm
