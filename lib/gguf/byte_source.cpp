#include "gguf/byte_source.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <mutex>
#include <utility>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"
#include "core/log.h"

#if defined(__linux__) && !defined(MADV_POPULATE_READ)
#define MADV_POPULATE_READ 22  // Linux 5.14; older C library headers lack the name
#endif

namespace llm {

void ByteSource::read_at(uint64_t offset, void *dst, uint64_t n) {
    if (offset > size() || n > size() - offset) {
        fail(LLM_ERR_IO, "read of {} bytes at offset {} past the end of {} ({} bytes)", n, offset, describe(), size());
    }
    if (n == 0) return;
    do_read(offset, dst, n);
    count(n);
}

void ByteSource::read_weights(uint64_t offset, void *dst, uint64_t n) {
    read_at(offset, dst, n);
    if (policy_ == CachePolicy::DROP || policy_ == CachePolicy::DIRECT) drop_cached(offset, n);
}

MappedRange::MappedRange(MappedRange &&o) noexcept
    : base_(std::exchange(o.base_, nullptr)), len_(std::exchange(o.len_, 0)), data_(std::exchange(o.data_, nullptr)) {}

MappedRange &MappedRange::operator=(MappedRange &&o) noexcept {
    std::swap(base_, o.base_);
    std::swap(len_, o.len_);
    std::swap(data_, o.data_);
    return *this;
}

void MappedRange::reset() {
    if (base_) ::munmap(base_, len_);
    base_ = nullptr;
    len_ = 0;
    data_ = nullptr;
}

uint64_t os_page_bytes() {
    static const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
    return page;
}

bool ByteSource::map_weights(uint64_t offset, uint64_t n, MappedRange &out) {
    out.reset();
    if (policy_ != CachePolicy::MAP || n == 0) return false;
    if (offset > size() || n > size() - offset) {
        fail(LLM_ERR_IO, "map of {} bytes at offset {} past the end of {} ({} bytes)", n, offset, describe(), size());
    }
    const uint64_t page = os_page_bytes();
    const uint64_t begin = offset / page * page;
    void *p = do_map(begin, offset + n - begin);
    if (!p) return false;
    out.base_ = p;
    out.len_ = static_cast<size_t>(offset + n - begin);
    out.data_ = static_cast<const uint8_t *>(p) + (offset - begin);
    count(n);
    return true;
}

void ByteSource::read_weights_aligned(uint64_t offset, void *dst, uint64_t n) {
    if (policy_ != CachePolicy::DIRECT)
        return read_weights(offset, dst, std::min(n, size() - std::min(offset, size())));
    if (offset % kDirectAlign != 0 || reinterpret_cast<uintptr_t>(dst) % kDirectAlign != 0 || offset >= size()) {
        fail(LLM_ERR_INTERNAL, "direct read at {} of {} bytes is not aligned", offset, n);
    }
    const uint64_t want = std::min(n, size() - offset);
    do_read_direct(offset, dst, (n + kDirectAlign - 1) / kDirectAlign * kDirectAlign);
    count(want);
}

namespace {

class FileSource final : public ByteSource {
public:
    FileSource(int fd, uint64_t size, std::string path) : fd_(fd), size_(size), path_(std::move(path)) {}
    ~FileSource() override {
        ::close(fd_);
        if (direct_fd_ >= 0) ::close(direct_fd_);
    }
    uint64_t size() const override { return size_; }
    std::string describe() const override { return "'" + path_ + "'"; }

    CachePolicy set_cache_policy(CachePolicy p) override {
        if (p == CachePolicy::DIRECT && direct_fd_ < 0) {
            direct_fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC | O_DIRECT);
            if (direct_fd_ < 0) {
                log().warn("{} cannot be opened for direct I/O ({}); dropping read pages from the cache instead",
                           describe(), std::strerror(errno));
                p = CachePolicy::DROP;
            }
        }
        policy_ = p;
        return p;
    }

protected:
    void do_read(uint64_t offset, void *dst, uint64_t n) override { read_fd(fd_, offset, dst, n, n); }

    void drop_cached(uint64_t offset, uint64_t n) override {
        // Advice only: a failure leaves the pages cached, which is harmless.
        (void)::posix_fadvise(fd_, static_cast<off_t>(offset), static_cast<off_t>(n), POSIX_FADV_DONTNEED);
    }

    void do_read_direct(uint64_t offset, void *dst, uint64_t n) override {
        const uint64_t need = std::min(n, size_ - offset);
        if (!direct_failed_.load(std::memory_order_relaxed)) {
            try {
                read_fd(direct_fd_, offset, dst, n, need);
                return;
            } catch (const Error &e) {
                // Some file systems accept O_DIRECT at open and refuse the reads (EINVAL).
                if (direct_errno_ != EINVAL) throw;
                direct_failed_ = true;
                log().warn("direct reads of {} fail ({}); dropping read pages from the cache instead", describe(),
                           e.what());
            }
        }
        read_fd(fd_, offset, dst, need, need);
        drop_cached(offset, need);
    }

    void *do_map(uint64_t begin, uint64_t len) override {
        // A page of the mapping past the file's end is SIGBUS when touched, and the file was only
        // checked at load: refuse a file that has shrunk since, rather than crash the host. (A
        // truncation while a piece is mapped cannot be caught this way; llm.h says so.)
        struct stat st {};
        if (::fstat(fd_, &st) == 0 && static_cast<uint64_t>(st.st_size) < begin + len) {
            fail(LLM_ERR_IO, "{} is {} bytes now, {} at load: the model file changed while in use", describe(),
                 static_cast<uint64_t>(st.st_size), size_);
        }
        // MAP_SHARED: nothing is ever written, and shared pages are the page cache's own (no copy).
        const bool populate_read = !no_populate_read_.load(std::memory_order_relaxed);
        void *p = ::mmap(nullptr, len, PROT_READ, MAP_SHARED | (populate_read ? 0 : MAP_POPULATE), fd_,
                         static_cast<off_t>(begin));
        if (p == MAP_FAILED) {
            if (!map_warned_.exchange(true))
                log().warn("{} cannot be mapped ({}); streamed pieces are copied instead", describe(), std::strerror(errno));
            return nullptr;
        }
        if (!populate_read) return p;
        // Start reading the whole range from disk at once (one large read-ahead, not a page at a
        // time on fault; nearly free when it is cached), then map its pages in here, on the thread
        // that reads ahead, so the compute threads touch them without faulting. Unlike
        // MAP_POPULATE, MADV_POPULATE_READ reports failure (an I/O error, a page past the end of the
        // file): then the piece is copied, and that read gives the status.
        (void)::madvise(p, len, MADV_WILLNEED);
        if (::madvise(p, len, MADV_POPULATE_READ) != 0) {
            const int e = errno;
            ::munmap(p, len);
            if (e == EINVAL) {  // before Linux 5.14: MAP_POPULATE from now on (its failures are silent)
                no_populate_read_ = true;
                return do_map(begin, len);
            }
            return nullptr;
        }
        return p;
    }

private:
    // Reads until `need` bytes (at most n) are in; more may come, up to n.
    void read_fd(int fd, uint64_t offset, void *dst, uint64_t n, uint64_t need) {
        auto *p = static_cast<char *>(dst);
        uint64_t done = 0;
        while (done < need) {
            ssize_t got = ::pread(fd, p + done, n - done, static_cast<off_t>(offset + done));
            if (got < 0) {
                if (errno == EINTR) continue;
                if (fd == direct_fd_) direct_errno_ = errno;
                fail(LLM_ERR_IO, "read of {}: {}", describe(), std::strerror(errno));
            }
            if (got == 0) fail(LLM_ERR_IO, "unexpected end of {} at offset {}", describe(), offset + done);
            done += static_cast<uint64_t>(got);
        }
    }

    int fd_;
    int direct_fd_ = -1;
    std::atomic<bool> direct_failed_{false};
    std::atomic<bool> no_populate_read_{false}, map_warned_{false};
    thread_local static int direct_errno_;
    uint64_t size_;
    std::string path_;
};

thread_local int FileSource::direct_errno_ = 0;

// A version 1 struct ends after close: copying sizeof(llm_io) from it would read past its end.
constexpr size_t kIoV1Size =
    (offsetof(llm_io, close) + sizeof(void (*)(void *)) + alignof(llm_io) - 1) / alignof(llm_io) * alignof(llm_io);
static_assert(offsetof(llm_io, flags) >= kIoV1Size, "llm_io version 2 fields must follow version 1's");

// Only the fields of io's version; later ones keep their defaults.
llm_io copy_io(const llm_io &io) {
    llm_io c{};
    std::memcpy(&c, &io, io.version >= 2 ? sizeof(llm_io) : kIoV1Size);
    return c;
}

class IoSource final : public ByteSource {
public:
    IoSource(const llm_io &io, std::shared_ptr<std::mutex> mu, std::string name)
        : io_(copy_io(io)), mu_(std::move(mu)), name_(std::move(name)) {}
    ~IoSource() override {
        if (io_.close) io_.close(io_.user);
    }
    void init_size() { size_ = io_.size(io_.user); }
    uint64_t size() const override { return size_; }
    std::string describe() const override { return name_; }
    bool thread_bound() const override { return (io_.flags & LLM_IO_THREAD_BOUND) != 0; }

protected:
    void do_read(uint64_t offset, void *dst, uint64_t n) override {
        // Hosts are promised one read_at at a time per model, even with I/O threads and sessions.
        std::lock_guard<std::mutex> lock(*mu_);
        int32_t st = io_.read_at(io_.user, offset, dst, n);
        if (st != LLM_OK) {
            fail(LLM_ERR_IO, "llm_io read_at({}, {}) failed with status {} ({})", offset, n, st, status_string(st));
        }
    }

private:
    llm_io io_;
    uint64_t size_ = 0;
    std::shared_ptr<std::mutex> mu_;  // shared by the shards of one model
    std::string name_;
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

void check_io(const llm_io &io, const std::string &what) {
    if (io.version < 1 || io.version > LLM_IO_VERSION) {
        fail(LLM_ERR_INVALID_ARGUMENT, "{}.version {} is not supported (this library: 1..{})", what, io.version,
             LLM_IO_VERSION);
    }
    if (!io.size || !io.read_at) fail(LLM_ERR_INVALID_ARGUMENT, "{}.size and {}.read_at must not be NULL", what, what);
    if (io.version >= 2 && (io.flags & ~static_cast<uint32_t>(LLM_IO_THREAD_BOUND)) != 0) {
        fail(LLM_ERR_INVALID_ARGUMENT, "{}.flags {:#x} has unknown bits", what, io.flags);
    }
}

void close_io(const llm_io *io) {
    if (io && io->version >= 1 && io->close) io->close(io->user);
}

const llm_io *io_at(const llm_io *ios, size_t k) {
    if (ios[0].version < 1 || ios[0].version > LLM_IO_VERSION) return k == 0 ? ios : nullptr;
    const size_t stride = ios[0].version == 1 ? kIoV1Size : sizeof(llm_io);
    return reinterpret_cast<const llm_io *>(reinterpret_cast<const char *>(ios) + k * stride);
}

std::unique_ptr<ByteSource> make_io_source(const llm_io &io) {
    // The source owns io.close from here on, so construct it first: any failure below still closes.
    auto src = std::make_unique<IoSource>(io, std::make_shared<std::mutex>(), "the host's llm_io");
    src->init_size();
    return src;
}

std::vector<std::unique_ptr<ByteSource>> make_io_sources(const llm_io *ios, size_t n, size_t *taken) {
    *taken = 0;
    std::vector<std::unique_ptr<ByteSource>> out;
    out.reserve(n);
    auto mu = std::make_shared<std::mutex>();
    for (size_t k = 0; k < n; ++k) {
        auto src = std::make_unique<IoSource>(*io_at(ios, k), mu, fmt::format("llm_io ios[{}]", k));
        *taken = k + 1;
        src->init_size();
        out.push_back(std::move(src));  // reserved: cannot throw
    }
    return out;
}

const char *name(CachePolicy p) {
    switch (p) {
    case CachePolicy::KEEP: return "keep";
    case CachePolicy::DROP: return "drop";
    case CachePolicy::DIRECT: return "direct";
    case CachePolicy::MAP: return "map";
    }
    return "?";
}

}  // namespace llm
