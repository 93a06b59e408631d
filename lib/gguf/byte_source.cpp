#include "gguf/byte_source.h"

#include <cerrno>
#include <cstring>
#include <mutex>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"

namespace llm {

void ByteSource::read_at(uint64_t offset, void *dst, uint64_t n) {
    if (offset > size() || n > size() - offset) {
        fail(LLM_ERR_IO, "read of {} bytes at offset {} past the end of {} ({} bytes)", n, offset,
             describe(), size());
    }
    if (n == 0) return;
    do_read(offset, dst, n);
    bytes_read_.fetch_add(n, std::memory_order_relaxed);
    read_calls_.fetch_add(1, std::memory_order_relaxed);
}

namespace {

class FileSource final : public ByteSource {
public:
    FileSource(int fd, uint64_t size, std::string path) : fd_(fd), size_(size), path_(std::move(path)) {}
    ~FileSource() override { ::close(fd_); }
    uint64_t size() const override { return size_; }
    std::string describe() const override { return "'" + path_ + "'"; }

protected:
    void do_read(uint64_t offset, void *dst, uint64_t n) override {
        auto *p = static_cast<char *>(dst);
        while (n > 0) {
            ssize_t got = ::pread(fd_, p, n, static_cast<off_t>(offset));
            if (got < 0) {
                if (errno == EINTR) continue;
                fail(LLM_ERR_IO, "read of {}: {}", describe(), std::strerror(errno));
            }
            if (got == 0) fail(LLM_ERR_IO, "unexpected end of {} at offset {}", describe(), offset);
            p += got;
            offset += static_cast<uint64_t>(got);
            n -= static_cast<uint64_t>(got);
        }
    }

private:
    int fd_;
    uint64_t size_;
    std::string path_;
};

class IoSource final : public ByteSource {
public:
    explicit IoSource(const llm_io &io) : io_(io) {}
    ~IoSource() override {
        if (io_.close) io_.close(io_.user);
    }
    void init_size() { size_ = io_.size(io_.user); }
    uint64_t size() const override { return size_; }
    std::string describe() const override { return "the host's llm_io"; }

protected:
    void do_read(uint64_t offset, void *dst, uint64_t n) override {
        // Hosts are promised one read_at at a time per model, even with I/O threads and sessions.
        std::lock_guard<std::mutex> lock(mu_);
        int32_t st = io_.read_at(io_.user, offset, dst, n);
        if (st != LLM_OK) {
            fail(LLM_ERR_IO, "llm_io read_at({}, {}) failed with status {} ({})", offset, n, st,
                 llm_status_string(st));
        }
    }

private:
    llm_io io_;
    uint64_t size_ = 0;
    std::mutex mu_;
};

}  // namespace

std::unique_ptr<ByteSource> open_file_source(const std::string &path) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) fail(LLM_ERR_IO, "cannot open '{}': {}", path, std::strerror(errno));
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        int e = errno;
        ::close(fd);
        fail(LLM_ERR_IO, "'{}' is not a regular file{}", path, e ? std::string(": ") + std::strerror(e) : "");
    }
    try {
        return std::make_unique<FileSource>(fd, static_cast<uint64_t>(st.st_size), path);
    } catch (...) {
        ::close(fd);
        throw;
    }
}

std::unique_ptr<ByteSource> make_io_source(const llm_io &io) {
    // The source owns io.close from here on, so construct it first: any failure below still closes.
    auto src = std::make_unique<IoSource>(io);
    src->init_size();
    return src;
}

}  // namespace llm
