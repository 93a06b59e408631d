// The saved-session format (version 2; version 1 had no recurrent fields). Every integer is
// little-endian; every count is checked against the model's shapes, the session and the size of the
// input before anything is allocated.
//
//   "LLMSTATE"                       8 bytes of magic
//   u32 version                      kStateFormatVersion
//   -- the model it belongs to --
//   u32 n, n bytes                   general.architecture
//   u32 n_layer, n_embd, n_head, n_head_kv, head_dim, n_vocab
//   u32 n, n x (u32 type, u32 count) tensors per GGUF type, in type order
//   u64 fingerprint                  WeightSource::fingerprint (metadata + tensor directory)
//   -- the session --
//   u32 kv_type_k, kv_type_v         KvType of the stored rows
//   u32 n_ctx                        of the saving session (informative)
//   u32 n_past                       positions in the context
//   u32 n_logits                     0, or n_vocab: the last evaluated position's logits
//   u32 n_history                    the sampler's repetition history (<= n_past)
//   u32 rng_index, 624 x u32         the sampler's RNG (Mt19937::State: index <= 624, state words)
//   n_layer x (u32 first, u64 row_bytes_k, u64 row_bytes_v)   positions [first, n_past) are stored
//                                    (a recurrent layer: rows of 0 bytes)
//   u32 recurrent_pos                (v2) positions [0, recurrent_pos) the recurrent state has absorbed
//                                    (<= n_past: the session's state, or its newest checkpoint below)
//   u64 recurrent_floats             (v2) the state's floats (0 without recurrent layers)
//   -- the body --
//   i32 x n_past tokens, f32 x n_logits, i32 x n_history
//   per layer: (n_past - first) key rows, then as many value rows, as the cache stores them
//   f32 x recurrent_floats           (v2) every recurrent layer's conv then ssm state, in layer order
//   u64 checksum                     FNV-1a 64 of every byte before it
// A state whose recurrent_pos is below n_past is completed by the loading session's next evaluation
// (it recomputes the tokens in between, as after a truncation). Checkpoints are not saved.
#include "runtime/session_state.h"

#include <algorithm>
#include <cctype>
#include <bit>
#include <cerrno>
#include <cstring>
#include <deque>
#include <map>
#include <string_view>
#include <vector>

#include <fcntl.h>
#include <unistd.h>

#include "core/error.h"
#include "core/log.h"
#include "gguf/byte_source.h"
#include "gguf/types.h"
#include "runtime/session.h"

namespace llm {

static_assert(std::endian::native == std::endian::little, "the state format is written as the host's bytes");

namespace {

constexpr char kMagic[8] = {'L', 'L', 'M', 'S', 'T', 'A', 'T', 'E'};
constexpr uint32_t kMaxArchName = 256;
constexpr uint32_t kMaxPositions = 1u << 24;  // n_ctx's own limit (session_options)

// The model binding and session fields of a state, as read from its header.
struct StateHeader {
    uint32_t version = 0;
    std::string arch;
    uint32_t n_layer = 0, n_embd = 0, n_head = 0, n_head_kv = 0, head_dim = 0, n_vocab = 0;
    std::map<uint32_t, uint32_t> types;
    uint64_t fingerprint = 0;
    uint32_t kv_type_k = 0, kv_type_v = 0, n_ctx = 0, n_past = 0, n_logits = 0, n_history = 0;
    Sampler::RngState rng;
    struct Layer {
        uint32_t first = 0;
        uint64_t row_bytes_k = 0, row_bytes_v = 0;
    };
    std::vector<Layer> layers;
    uint32_t recurrent_pos = 0;
    uint64_t recurrent_floats = 0;
    uint64_t header_bytes = 0;  // where the body starts
    uint64_t total_bytes = 0;   // the whole state, checksum included
};

std::map<uint32_t, uint32_t> tensor_type_counts(const Model &m) {
    std::map<uint32_t, uint32_t> c;
    for (const TensorInfo &t : m.source().tensors()) ++c[static_cast<uint32_t>(t.type)];
    return c;
}

std::string types_string(const std::map<uint32_t, uint32_t> &types) {
    std::string s;
    for (const auto &[type, count] : types) s += fmt::format("{}{} x{}", s.empty() ? "" : ", ", type_name(type), count);
    return s.empty() ? "none" : s;
}

// A KV type id read from a file, which may be one this build does not know; upper case, as the
// messages name types ("F16 keys").
std::string kv_type_id_name(uint32_t t) {
    if (t > static_cast<uint32_t>(KvType::Q8_0)) return "unknown";
    std::string s = name(static_cast<KvType>(t));
    for (char &c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    return s;
}

// ---- writing ---------------------------------------------------------------------------------------

template <class T>
void put(StateSink &out, T v) {
    out.write(&v, sizeof v);
}

class WriterSink final : public StateSink {
public:
    explicit WriterSink(const llm_writer &w) : w_(w) {}

protected:
    void do_write(const void *data, uint64_t n) override {
        const int32_t st = w_.write(w_.user, data, n);
        if (st != LLM_OK) {
            // A host status is passed on; anything else a host may return counts as an I/O error.
            fail(st < 0 ? st : LLM_ERR_IO, "llm_writer.write of {} bytes failed with status {} ({})", n, st,
                 status_string(st));
        }
    }

private:
    llm_writer w_;
};

class FileSink final : public StateSink {
public:
    FileSink(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}

protected:
    void do_write(const void *data, uint64_t n) override {
        const auto *p = static_cast<const char *>(data);
        while (n > 0) {
            const ssize_t got = ::write(fd_, p, static_cast<size_t>(std::min<uint64_t>(n, 1u << 30)));
            if (got < 0) {
                if (errno == EINTR) continue;
                fail(LLM_ERR_IO, "cannot write '{}': {}", path_, std::strerror(errno));
            }
            p += got;
            n -= static_cast<uint64_t>(got);
        }
    }

private:
    int fd_;
    std::string path_;
};

// ---- reading ---------------------------------------------------------------------------------------

// Sequential reads of a state from a ByteSource, each checked against its size first (so a short
// input is a truncated state, LLM_ERR_FORMAT, not an I/O error), optionally hashed.
class StateReader {
public:
    StateReader(ByteSource &in, Fnv1a64 *hash) : in_(in), size_(in.size()), hash_(hash) {}
    void read(void *dst, uint64_t n) {
        if (n > size_ - std::min(pos_, size_)) {
            fail(LLM_ERR_FORMAT, "the state is truncated: {} bytes needed at offset {}, the input has {}", n, pos_,
                 size_);
        }
        in_.read_at(pos_, dst, n);
        if (hash_) hash_->add(dst, static_cast<size_t>(n));
        pos_ += n;
    }
    template <class T>
    T get() {
        T v;
        read(&v, sizeof v);
        return v;
    }
    uint64_t pos() const { return pos_; }
    uint64_t size() const { return size_; }

private:
    ByteSource &in_;
    uint64_t size_;
    uint64_t pos_ = 0;
    Fnv1a64 *hash_;
};

uint64_t checked_add(uint64_t a, uint64_t b) {
    uint64_t r;
    if (__builtin_add_overflow(a, b, &r)) fail(LLM_ERR_FORMAT, "the state's sizes overflow");
    return r;
}

uint64_t checked_mul(uint64_t a, uint64_t b) {
    uint64_t r;
    if (__builtin_mul_overflow(a, b, &r)) fail(LLM_ERR_FORMAT, "the state's sizes overflow");
    return r;
}

// The header, with every count bounded and the total size computed and compared with the input's.
StateHeader read_header(StateReader &r) {
    StateHeader h;
    char magic[sizeof kMagic];
    r.read(magic, sizeof magic);
    if (std::memcmp(magic, kMagic, sizeof magic) != 0) fail(LLM_ERR_FORMAT, "not a libllm saved session (bad magic)");
    h.version = r.get<uint32_t>();
    if (h.version == 0) fail(LLM_ERR_FORMAT, "the state has format version 0, which does not exist");
    if (h.version > kStateFormatVersion) {
        fail(LLM_ERR_FORMAT, "the state has format version {}, newer than this library's {}: it needs a newer libllm",
             h.version, kStateFormatVersion);
    }
    const uint32_t arch_len = r.get<uint32_t>();
    if (arch_len > kMaxArchName)
        fail(LLM_ERR_FORMAT, "the state's architecture name of {} bytes is too long", arch_len);
    h.arch.resize(arch_len);
    r.read(h.arch.data(), arch_len);
    for (uint32_t *f : {&h.n_layer, &h.n_embd, &h.n_head, &h.n_head_kv, &h.head_dim, &h.n_vocab})
        *f = r.get<uint32_t>();
    const uint32_t n_types = r.get<uint32_t>();
    if (n_types > kTensorTypeCount) fail(LLM_ERR_FORMAT, "the state lists {} tensor types", n_types);
    for (uint32_t i = 0; i < n_types; ++i) {
        const uint32_t type = r.get<uint32_t>(), count = r.get<uint32_t>();
        if (!h.types.emplace(type, count).second) fail(LLM_ERR_FORMAT, "the state lists tensor type {} twice", type);
    }
    h.fingerprint = r.get<uint64_t>();
    h.kv_type_k = r.get<uint32_t>();
    h.kv_type_v = r.get<uint32_t>();
    h.n_ctx = r.get<uint32_t>();
    h.n_past = r.get<uint32_t>();
    h.n_logits = r.get<uint32_t>();
    h.n_history = r.get<uint32_t>();
    h.rng.index = r.get<uint32_t>();
    r.read(h.rng.words.data(), sizeof h.rng.words);
    if (h.n_past > kMaxPositions) fail(LLM_ERR_FORMAT, "the state claims {} positions", h.n_past);
    if (h.n_logits != 0 && h.n_logits != h.n_vocab) {
        fail(LLM_ERR_FORMAT, "the state holds {} logits for a vocabulary of {}", h.n_logits, h.n_vocab);
    }
    if (h.n_history > h.n_past) {
        fail(LLM_ERR_FORMAT, "the state's repetition history ({} tokens) is longer than its context ({})", h.n_history,
             h.n_past);
    }
    if (h.rng.index > h.rng.words.size()) fail(LLM_ERR_FORMAT, "the state's RNG index {} is out of range", h.rng.index);
    // The layer table: its size is bounded by the input, which every read checks.
    if (checked_mul(h.n_layer, 20) > r.size() - r.pos()) {
        fail(LLM_ERR_FORMAT, "the state is truncated: a table of {} layers does not fit", h.n_layer);
    }
    h.layers.resize(h.n_layer);
    uint64_t total = 0;
    for (uint32_t l = 0; l < h.n_layer; ++l) {
        StateHeader::Layer &L = h.layers[l];
        L.first = r.get<uint32_t>();
        L.row_bytes_k = r.get<uint64_t>();
        L.row_bytes_v = r.get<uint64_t>();
        if (L.first > h.n_past)
            fail(LLM_ERR_FORMAT, "layer {} of the state starts at position {} of {}", l, L.first, h.n_past);
        total = checked_add(total, checked_mul(h.n_past - L.first, checked_add(L.row_bytes_k, L.row_bytes_v)));
    }
    if (h.version >= 2) {
        h.recurrent_pos = r.get<uint32_t>();
        h.recurrent_floats = r.get<uint64_t>();
        if (h.recurrent_pos > h.n_past) {
            fail(LLM_ERR_FORMAT, "the state's recurrent state is at position {}, past its context ({})",
                 h.recurrent_pos, h.n_past);
        }
        total = checked_add(total, checked_mul(h.recurrent_floats, 4));
    }
    h.header_bytes = r.pos();
    total = checked_add(total, h.header_bytes);
    total = checked_add(total, 4ull * h.n_past + 4ull * h.n_logits + 4ull * h.n_history + 8);
    h.total_bytes = total;
    if (r.size() < total)
        fail(LLM_ERR_FORMAT, "the state is truncated: it needs {} bytes, the input has {}", total, r.size());
    if (r.size() > total) fail(LLM_ERR_FORMAT, "{} bytes follow the end of the state", r.size() - total);
    return h;
}

// The first difference between the state's model and m, or "".
std::string model_difference(const StateHeader &h, const Model &m) {
    const ModelConfig &c = m.config();
    if (h.arch != c.arch_name) return fmt::format("architecture '{}' in the state, '{}' here", h.arch, c.arch_name);
    const std::pair<const char *, std::pair<uint32_t, uint32_t>> shapes[] = {
        {"n_layer", {h.n_layer, c.n_layer}},    {"n_embd", {h.n_embd, c.n_embd}},
        {"n_head", {h.n_head, c.n_head}},       {"n_head_kv", {h.n_head_kv, c.n_head_kv}},
        {"head_dim", {h.head_dim, c.head_dim}}, {"n_vocab", {h.n_vocab, c.n_vocab}}};
    for (const auto &[name, v] : shapes) {
        if (v.first != v.second) return fmt::format("{} {} in the state, {} here", name, v.first, v.second);
    }
    const auto types = tensor_type_counts(m);
    if (h.types != types)
        return fmt::format("tensor types [{}] in the state, [{}] here", types_string(h.types), types_string(types));
    if (h.fingerprint != m.fingerprint()) {
        return fmt::format(
            "fingerprint {:016x} in the state, {:016x} here (the files' metadata or tensor layout differ)",
            h.fingerprint, m.fingerprint());
    }
    return "";
}

// Hashes bytes [0, n) of the input in 1 MiB pieces.
uint64_t hash_prefix(ByteSource &in, uint64_t n) {
    Fnv1a64 h;
    std::vector<uint8_t> buf(std::min<uint64_t>(n, 1u << 20));
    for (uint64_t off = 0; off < n;) {
        const uint64_t k = std::min<uint64_t>(buf.size(), n - off);
        in.read_at(off, buf.data(), k);
        h.add(buf.data(), static_cast<size_t>(k));
        off += k;
    }
    return h.value();
}

}  // namespace

std::unique_ptr<StateSink> writer_sink(const llm_writer &w) {
    if (w.version != LLM_WRITER_VERSION) {
        fail(LLM_ERR_INVALID_ARGUMENT, "llm_writer.version {} is not supported (this library: {})", w.version,
             LLM_WRITER_VERSION);
    }
    if (!w.write) fail(LLM_ERR_INVALID_ARGUMENT, "llm_writer.write must not be NULL");
    return std::make_unique<WriterSink>(w);
}

void Session::save(StateSink &out) const {
    const ModelConfig &c = m_.config();
    // The recurrent state goes as it is when it holds exactly the context; else (after a truncation
    // or a failed call) its newest checkpoint at or below n_past, which the loader completes.
    const RecurrentState &rec = kv_.recurrent();
    const bool rec_live = rec.at(n_past_) && !kv_suspect_;
    const int32_t rec_pos = rec_live ? n_past_ : rec.checkpoint_at_or_below(n_past_);
    const float *rec_data = rec_live ? rec.data() : rec.checkpoint_data(n_past_);
    out.write(kMagic, sizeof kMagic);
    put<uint32_t>(out, kStateFormatVersion);
    put<uint32_t>(out, static_cast<uint32_t>(c.arch_name.size()));
    out.write(c.arch_name.data(), c.arch_name.size());
    for (uint32_t v : {c.n_layer, c.n_embd, c.n_head, c.n_head_kv, c.head_dim, c.n_vocab}) put<uint32_t>(out, v);
    const auto types = tensor_type_counts(m_);
    put<uint32_t>(out, static_cast<uint32_t>(types.size()));
    for (const auto &[type, count] : types) {
        put<uint32_t>(out, type);
        put<uint32_t>(out, count);
    }
    put<uint64_t>(out, m_.fingerprint());
    put<uint32_t>(out, static_cast<uint32_t>(kv_.type_k()));
    put<uint32_t>(out, static_cast<uint32_t>(kv_.type_v()));
    put<uint32_t>(out, static_cast<uint32_t>(kv_.n_ctx()));
    put<uint32_t>(out, static_cast<uint32_t>(n_past_));
    const uint32_t n_logits = logits_rows_ > 0 ? c.n_vocab : 0;
    put<uint32_t>(out, n_logits);
    const std::deque<int32_t> &history = sampler_.history();
    put<uint32_t>(out, static_cast<uint32_t>(history.size()));
    const Sampler::RngState rng = sampler_.rng_state();
    put<uint32_t>(out, rng.index);
    out.write(rng.words.data(), sizeof rng.words);
    for (uint32_t l = 0; l < c.n_layer; ++l) {
        put<uint32_t>(out, static_cast<uint32_t>(kv_.first_held(l, n_past_)));
        put<uint64_t>(out, kv_.row_bytes_k(l));
        put<uint64_t>(out, kv_.row_bytes_v(l));
    }
    put<uint32_t>(out, static_cast<uint32_t>(rec_pos));
    put<uint64_t>(out, rec.n_floats());
    out.write(tokens_.data(), tokens_.size() * sizeof(int32_t));
    if (n_logits) out.write(logits(), n_logits * sizeof(float));
    for (int32_t t : history) put<int32_t>(out, t);
    std::vector<uint8_t> k, v;  // one layer's rows at a time
    for (uint32_t l = 0; l < c.n_layer; ++l) {
        const int32_t first = kv_.first_held(l, n_past_);
        k.resize((n_past_ - first) * kv_.row_bytes_k(l));
        v.resize((n_past_ - first) * kv_.row_bytes_v(l));
        kv_.copy_out(l, first, n_past_, k.data(), v.data());
        out.write(k.data(), k.size());
        out.write(v.data(), v.size());
    }
    if (rec_data) {
        out.write(rec_data, rec.n_floats() * sizeof(float));
    } else {
        const std::vector<float> zeros(rec.n_floats(), 0.0f);  // the start of a sequence
        out.write(zeros.data(), zeros.size() * sizeof(float));
    }
    put<uint64_t>(out, out.checksum());
}

// Two passes over the input: the first checks its structure and checksum without allocating more
// than the header; then, with the model and session checked against the header, the second reads
// the body. Rows go straight into the cache when the session is empty (nothing there to protect),
// else they are staged and installed only once all of it has been read.
void Session::load(ByteSource &in) {
    CallScope call(*this);
    const ModelConfig &c = m_.config();
    StateHeader h;
    {
        StateReader r(in, nullptr);
        h = read_header(r);
    }
    const uint64_t body_end = h.total_bytes - 8;
    uint64_t stored = 0;
    in.read_at(body_end, &stored, sizeof stored);
    if (hash_prefix(in, body_end) != stored)
        fail(LLM_ERR_FORMAT, "the state's checksum does not match: it is corrupted");

    if (const std::string d = model_difference(h, m_); !d.empty()) {
        fail(LLM_ERR_INVALID_ARGUMENT, "the state was saved by another model: {}", d);
    }
    if (h.kv_type_k != static_cast<uint32_t>(kv_.type_k()) || h.kv_type_v != static_cast<uint32_t>(kv_.type_v())) {
        fail(LLM_ERR_INVALID_ARGUMENT, "the state's KV cache holds {} keys and {} values, this session's {} and {}",
             kv_type_id_name(h.kv_type_k), kv_type_id_name(h.kv_type_v),
             kv_type_id_name(static_cast<uint32_t>(kv_.type_k())),
             kv_type_id_name(static_cast<uint32_t>(kv_.type_v())));
    }
    RecurrentState &rec = kv_.recurrent();
    if (h.recurrent_floats != rec.n_floats()) {
        if (h.version < 2)
            fail(LLM_ERR_FORMAT, "a version {} state carries no recurrent state, which {} needs", h.version,
                 c.arch_name);
        fail(LLM_ERR_INVALID_ARGUMENT, "the state's recurrent state has {} floats, this model's {}", h.recurrent_floats,
             rec.n_floats());
    }
    const int32_t n_past = static_cast<int32_t>(h.n_past);
    if (n_past > kv_.n_ctx()) {
        fail(LLM_ERR_INVALID_ARGUMENT, "the state holds {} positions; this session's context has {}", n_past,
             kv_.n_ctx());
    }
    for (uint32_t l = 0; l < c.n_layer; ++l) {
        const StateHeader::Layer &L = h.layers[l];
        if (L.row_bytes_k != kv_.row_bytes_k(l) || L.row_bytes_v != kv_.row_bytes_v(l)) {
            fail(LLM_ERR_INVALID_ARGUMENT, "layer {}: the state's rows are {} + {} bytes, this session's {} + {}", l,
                 L.row_bytes_k, L.row_bytes_v, kv_.row_bytes_k(l), kv_.row_bytes_v(l));
        }
        // A ring layer's state may lack positions its next query reads (saved after a truncation):
        // the session then recomputes them from the tokens, as it would have itself.
        if (!kv_.is_ring(l) && L.first > 0) {
            fail(LLM_ERR_INVALID_ARGUMENT,
                 "layer {}: the state holds positions from {}, this session needs them from 0", l, L.first);
        }
    }

    // The body. Sizes are all bounded now: by the input's size, which matched the header, and by
    // this session's own cache.
    Fnv1a64 again;
    StateReader r(in, &again);
    {
        std::vector<uint8_t> head(h.header_bytes);
        r.read(head.data(), head.size());
    }
    std::vector<int32_t> tokens(h.n_past);
    r.read(tokens.data(), tokens.size() * sizeof(int32_t));
    std::vector<float> logits(h.n_logits);
    r.read(logits.data(), logits.size() * sizeof(float));
    std::vector<int32_t> hist(h.n_history);
    r.read(hist.data(), hist.size() * sizeof(int32_t));
    for (const std::vector<int32_t> *ids : {&tokens, &hist}) {
        for (int32_t t : *ids) {
            if (t < 0 || static_cast<uint32_t>(t) >= c.n_vocab)
                fail(LLM_ERR_FORMAT, "the state holds token id {}, outside the vocabulary", t);
        }
    }
    const bool direct = n_past_ == 0;
    struct Rows {
        int32_t first = 0;
        std::vector<uint8_t> k, v;
    };
    std::vector<Rows> staged(direct ? 0 : c.n_layer);
    Rows scratch;
    for (uint32_t l = 0; l < c.n_layer; ++l) {
        const StateHeader::Layer &L = h.layers[l];
        Rows &rows = direct ? scratch : staged[l];
        const uint64_t n = h.n_past - L.first;
        rows.k.resize(n * L.row_bytes_k);
        rows.v.resize(n * L.row_bytes_v);
        r.read(rows.k.data(), rows.k.size());
        r.read(rows.v.data(), rows.v.size());
        // Rows the session's ring cannot hold (older than its capacity) were read for the checksum only.
        rows.first = std::max(static_cast<int32_t>(L.first), kv_.first_storable(l, n_past));
        if (direct) {
            if (l == 0) kv_.clear();  // nothing to protect; stale ring slots must not count as held
            const uint64_t skip = static_cast<uint64_t>(rows.first) - L.first;
            kv_.copy_in(l, rows.first, n_past, rows.k.data() + skip * L.row_bytes_k,
                        rows.v.data() + skip * L.row_bytes_v);
        } else {
            const uint64_t skip = static_cast<uint64_t>(rows.first) - L.first;
            rows.k.erase(rows.k.begin(), rows.k.begin() + static_cast<ptrdiff_t>(skip * L.row_bytes_k));
            rows.v.erase(rows.v.begin(), rows.v.begin() + static_cast<ptrdiff_t>(skip * L.row_bytes_v));
        }
    }
    std::vector<float> rec_floats(h.recurrent_floats);
    r.read(rec_floats.data(), rec_floats.size() * sizeof(float));
    if (again.value() != stored) fail(LLM_ERR_FORMAT, "the state changed while it was read (checksum)");

    // Install: nothing below throws.
    drop_pending();
    std::deque<int32_t> history(hist.begin(), hist.end());
    if (!direct) kv_.clear();
    for (uint32_t l = 0; l < staged.size(); ++l)
        kv_.copy_in(l, staged[l].first, n_past, staged[l].k.data(), staged[l].v.data());
    // The recurrent state, and a checkpoint of it: the next evaluation completes it to n_past if it
    // is short (restore_window()), and a truncation below n_past need not go back to position 0.
    // The session's own checkpoints belonged to its old context.
    rec.drop_checkpoints();
    rec.drop_journal();  // a verify pass's records of the old context
    std::copy(rec_floats.begin(), rec_floats.end(), rec.data());
    rec.set_all_next_pos(static_cast<int32_t>(h.recurrent_pos));
    if (h.recurrent_pos > 0) rec.save_checkpoint(static_cast<int32_t>(h.recurrent_pos));
    tokens_.swap(tokens);
    n_past_ = n_past;
    kv_suspect_ = true;  // restore_window() checks the rings and the recurrent state before the next evaluation
    if (h.n_logits) {
        logits_.swap(logits);
        logits_rows_ = 1;
    } else {
        logits_rows_ = 0;
    }
    sampler_.restore(h.rng, std::move(history));
    // A saved session holds no grammar state: the grammar in use starts over from the loaded context,
    // constraining what is generated after it. The host is told, since a structure the saved
    // conversation left half-done is not continued by it.
    if (grammar_) {
        log().warn(
            "llm_session_load: the session's grammar starts over at its start rule (a saved session "
            "holds no grammar state); attach a grammar for the rest to continue a half-done structure");
    }
    restart_grammar();
    stops_.clear();
}

void save_state_file(const Session &s, const std::string &path) {
    const std::string tmp = fmt::format("{}.tmp-{}", path, static_cast<long>(::getpid()));
    int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) fail(LLM_ERR_IO, "cannot create '{}': {}", tmp, std::strerror(errno));
    try {
        FileSink sink(fd, tmp);
        s.save(sink);
        // On disk before it replaces the old state: a crash after the rename must not find it empty.
        if (::fsync(fd) != 0) fail(LLM_ERR_IO, "cannot flush '{}': {}", tmp, std::strerror(errno));
        const int rc = ::close(fd);
        fd = -1;
        if (rc != 0) fail(LLM_ERR_IO, "cannot write '{}': {}", tmp, std::strerror(errno));
        if (::rename(tmp.c_str(), path.c_str()) != 0) {
            fail(LLM_ERR_IO, "cannot rename '{}' to '{}': {}", tmp, path, std::strerror(errno));
        }
    } catch (...) {
        if (fd >= 0) ::close(fd);
        ::unlink(tmp.c_str());
        throw;
    }
}

void load_state_file(Session &s, const std::string &path) {
    std::unique_ptr<ByteSource> in = open_file_source(path);
    s.load(*in);
}

}  // namespace llm
