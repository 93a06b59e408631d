/* A host written in C99 driving the whole public API: load from a path and through llm_io, tokenize,
   prefill, sample, generate with callbacks, the pull API, embeddings, errors, and a cancel from a
   second thread.
   Compiled with -std=c99 -pedantic -Werror, linked against the shared library like any host. */
#include "llm.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures = 0;
#define EXPECT(cond)                                                                                \
    do {                                                                                            \
        if (!(cond)) {                                                                              \
            fprintf(stderr, "%s:%d: EXPECT(%s) failed; last error: %s\n", __FILE__, __LINE__, #cond, \
                    llm_last_error());                                                              \
            ++failures;                                                                             \
        }                                                                                           \
    } while (0)

/* ---- llm_io over a FILE* ---- */
typedef struct {
    FILE *f;
    int closes;
    int fail_after; /* read_at fails from this call on; < 0: never */
    int calls;
} file_io;

static uint64_t io_size(void *user) {
    file_io *io = (file_io *)user;
    long n;
    fseek(io->f, 0, SEEK_END);
    n = ftell(io->f);
    return n < 0 ? 0 : (uint64_t)n;
}

static int32_t io_read_at(void *user, uint64_t offset, void *dst, uint64_t n) {
    file_io *io = (file_io *)user;
    if (io->fail_after >= 0 && io->calls++ >= io->fail_after) return LLM_ERR_IO;
    if (fseek(io->f, (long)offset, SEEK_SET) != 0) return LLM_ERR_IO;
    return fread(dst, 1, (size_t)n, io->f) == n ? LLM_OK : LLM_ERR_IO;
}

static void io_close(void *user) {
    file_io *io = (file_io *)user;
    io->closes++;
}

/* ---- llm_writer into a FILE* ---- */
static int32_t file_write(void *user, const void *src, uint64_t n) {
    return fwrite(src, 1, (size_t)n, (FILE *)user) == n ? LLM_OK : LLM_ERR_IO;
}

/* ---- callbacks ---- */
typedef struct {
    char text[4096];
    size_t len;
    int count;
} collect;

static bool on_token(int32_t token, const char *piece, size_t len, void *user) {
    collect *c = (collect *)user;
    (void)token;
    if (c->len + len < sizeof c->text) {
        memcpy(c->text + c->len, piece, len);
        c->len += len;
        c->text[c->len] = '\0';
    }
    c->count++;
    return true;
}

static int progress_calls = 0;
static bool on_progress(float f, void *user) {
    (void)user;
    EXPECT(f >= 0.0f && f <= 1.0f);
    progress_calls++;
    return true;
}
static bool cancel_progress(float f, void *user) {
    (void)f;
    (void)user;
    return false;
}

/* ---- cancel from another thread ---- */
typedef struct {
    llm_session *s;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int started;   /* set by the token callback */
    int cancelled; /* set by the canceller */
} cancel_ctx;

static void *canceller(void *arg) {
    cancel_ctx *c = (cancel_ctx *)arg;
    pthread_mutex_lock(&c->mu);
    while (!c->started) pthread_cond_wait(&c->cv, &c->mu);
    llm_session_cancel(c->s);
    c->cancelled = 1;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

static bool token_then_wait(int32_t token, const char *piece, size_t len, void *user) {
    cancel_ctx *c = (cancel_ctx *)user;
    (void)token;
    (void)piece;
    (void)len;
    /* Hold generation until the other thread has cancelled, so the next evaluation must see it. */
    pthread_mutex_lock(&c->mu);
    c->started = 1;
    pthread_cond_broadcast(&c->cv);
    while (!c->cancelled) pthread_cond_wait(&c->cv, &c->mu);
    pthread_mutex_unlock(&c->mu);
    return true;
}

int main(int argc, char **argv) {
    const char *path;
    llm_model_params mp;
    llm_session_params sp;
    llm_model *m = NULL, *m2 = NULL;
    llm_session *s = NULL;
    int32_t toks[64], n = 0, tok = 0, nv = 0, st;
    const float *logits = NULL;
    collect c;
    char piece[64];
    size_t len = 0;

    if (argc < 2) {
        fprintf(stderr, "usage: c_api_test stories260K.gguf\n");
        return 2;
    }
    path = argv[1];

    EXPECT(strlen(llm_version_string()) > 0);
    EXPECT(strcmp(llm_status_string(LLM_ERR_FORMAT), "malformed model file") == 0);
    EXPECT(llm_last_error() != NULL);

    /* NULL handles and frees */
    llm_model_free(NULL);
    llm_session_free(NULL);
    llm_session_cancel(NULL);
    EXPECT(llm_model_load(NULL, NULL, &m) == LLM_ERR_INVALID_ARGUMENT);
    EXPECT(strlen(llm_last_error()) > 0);
    EXPECT(llm_model_load("/nonexistent/model.gguf", NULL, &m) == LLM_ERR_IO);
    EXPECT(llm_session_prefill(NULL, toks, 1) == LLM_ERR_INVALID_ARGUMENT);
    EXPECT(llm_model_info_json(NULL) == NULL);

    /* bad params version */
    llm_model_params_init(&mp, LLM_MODEL_PARAMS_VERSION);
    mp.version = 999;
    EXPECT(llm_model_load(path, &mp, &m) == LLM_ERR_INVALID_ARGUMENT);

    /* progress may cancel a load */
    llm_model_params_init(&mp, LLM_MODEL_PARAMS_VERSION);
    mp.progress = cancel_progress;
    EXPECT(llm_model_load(path, &mp, &m) == LLM_ERR_CANCELLED);
    EXPECT(m == NULL);

    /* load with progress */
    llm_model_params_init(&mp, LLM_MODEL_PARAMS_VERSION);
    mp.progress = on_progress;
    EXPECT(llm_model_load(path, &mp, &m) == LLM_OK);
    EXPECT(progress_calls > 0);
    if (!m) return 1;
    EXPECT(strstr(llm_model_info_json(m), "\"arch\":\"llama\"") != NULL);
    EXPECT(llm_model_n_vocab(m) == 512);
    EXPECT(llm_model_token_bos(m) == 1);
    EXPECT(llm_model_token_is_eog(m, llm_model_token_eos(m)));

    /* tokenize: size query, then fill */
    EXPECT(llm_tokenize(m, "Once upon a time", 16, true, false, NULL, 0, &n) == LLM_ERR_BUFFER_TOO_SMALL);
    EXPECT(n == 5);
    EXPECT(llm_tokenize(m, "Once upon a time", 16, true, false, toks, 64, &n) == LLM_OK);
    EXPECT(n == 5 && toks[0] == 1);
    EXPECT(llm_token_to_piece(m, toks[1], piece, 0, &len) == LLM_ERR_BUFFER_TOO_SMALL);
    EXPECT(len > 0);

    /* metadata and chat templates (0.3): stories260K has no template of its own */
    {
        char text[64];
        static const char *tmpl = "{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}"
                                  "{% if add_generation_prompt %}<assistant>{% endif %}{{ eos_token }}";
        llm_chat_message msgs[2];
        msgs[0].role = "user";
        msgs[0].content = "Hi";
        msgs[1].role = "assistant";
        msgs[1].content = "Hello";
        EXPECT(llm_model_meta_string(m, "general.architecture", NULL, 0, &len) == LLM_ERR_BUFFER_TOO_SMALL && len == 5);
        EXPECT(llm_model_meta_string(m, "general.architecture", text, sizeof text, &len) == LLM_OK);
        EXPECT(strcmp(text, "llama") == 0);
        EXPECT(llm_model_meta_string(m, "no.such.key", text, sizeof text, &len) == LLM_ERR_NOT_FOUND);
        EXPECT(llm_model_chat_template(m, NULL, text, sizeof text, &len) == LLM_ERR_NOT_FOUND);
        EXPECT(llm_chat_apply_template(m, NULL, msgs, 2, true, text, sizeof text, &len) == LLM_ERR_NOT_FOUND);
        EXPECT(llm_chat_apply_template(m, tmpl, msgs, 2, true, text, sizeof text, &len) == LLM_OK);
        EXPECT(strcmp(text, "<user>Hi<assistant>Hello<assistant></s>") == 0);
        EXPECT(llm_chat_apply_template(NULL, tmpl, msgs, 1, false, text, sizeof text, &len) == LLM_OK);
        EXPECT(strcmp(text, "<user>Hi") == 0 && len == 8);
    }

    /* tools in chat templates (0.4): a request as JSON; a reply parsed into its calls */
    {
        char text[256];
        static const char *tmpl = "{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}"
                                  "{% if tools %}[{{ tools[0].function.name }}]{% endif %}"
                                  "{% if add_generation_prompt %}<assistant>{% endif %}<tool_call>";
        static const char *req = "{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}],"
                                 " \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\"}}],"
                                 " \"add_generation_prompt\": true}";
        EXPECT(llm_chat_apply_template_json(m, tmpl, req, text, sizeof text, &len) == LLM_OK);
        EXPECT(strcmp(text, "<user>Hi[f]<assistant><tool_call>") == 0);
        EXPECT(llm_chat_apply_template_json(m, tmpl, "{\"messages\": 1}", text, sizeof text, &len) ==
               LLM_ERR_INVALID_ARGUMENT);
        EXPECT(llm_chat_parse(NULL, tmpl, "ok<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": 1}}</tool_call>",
                              NULL, text, sizeof text, &len) == LLM_OK);
        EXPECT(strcmp(text, "{\"content\":\"ok\",\"reasoning_content\":\"\",\"tool_calls\":[{\"name\":\"f\","
                            "\"arguments\":\"{\\\"a\\\":1}\",\"id\":\"\"}],\"format\":\"hermes\",\"parsed\":true}") == 0);
    }

    /* a session: prefill, logits, sample, accept */
    llm_session_params_init(&sp, LLM_SESSION_PARAMS_VERSION);
    sp.temperature = 0.0f;
    sp.n_ctx = 128;
    EXPECT(llm_session_create(m, &sp, &s) == LLM_OK);
    EXPECT(llm_session_logits(s, &logits, &nv) == LLM_ERR_INVALID_ARGUMENT); /* nothing evaluated yet */
    EXPECT(llm_session_prefill(s, toks, (size_t)n) == LLM_OK);
    EXPECT(llm_session_logits(s, &logits, &nv) == LLM_OK && nv == 512);
    EXPECT(llm_session_sample(s, &tok) == LLM_OK);
    EXPECT(llm_session_accept(s, tok) == LLM_OK);
    EXPECT(llm_session_n_past(s) == 6);
    EXPECT(llm_session_accept(s, 100000) == LLM_ERR_INVALID_ARGUMENT);
    EXPECT(llm_session_n_past(s) == 6);

    /* pull API */
    EXPECT(llm_session_next(s, &tok, piece, sizeof piece, &len) == LLM_OK);
    EXPECT(llm_session_n_past(s) == 7);

    /* context full: nothing changes */
    {
        int32_t many[200];
        int i;
        for (i = 0; i < 200; ++i) many[i] = 5;
        EXPECT(llm_session_prefill(s, many, 200) == LLM_ERR_CONTEXT_FULL);
        EXPECT(llm_session_n_past(s) == 7);
    }

    /* generate: greedy story from a fresh context */
    EXPECT(llm_session_reset(s) == LLM_OK);
    memset(&c, 0, sizeof c);
    st = llm_session_generate(s, "Once upon a time", 32, on_token, &c);
    EXPECT(st == LLM_OK || st == LLM_DONE);
    EXPECT(strncmp(c.text, ", there was a little girl named Lily", 36) == 0);
    printf("generated: %s\n", c.text);
    EXPECT(strstr(llm_session_stats_json(s), "\"generated_tokens\":32") != NULL);

    /* saved sessions: through a writer and llm_io, and by path; both continue as the original */
    {
        const char *path = "c_api_test.llmstate";
        FILE *f = tmpfile();
        llm_writer w;
        file_io rio;
        llm_io io;
        llm_session *r = NULL;
        collect a, b;
        memset(&w, 0, sizeof w);
        w.version = LLM_WRITER_VERSION;
        w.user = f;
        w.write = file_write;
        EXPECT(f != NULL);
        EXPECT(llm_session_save_io(s, &w) == LLM_OK);
        EXPECT(llm_session_save(s, path) == LLM_OK);
        memset(&a, 0, sizeof a);
        EXPECT(llm_session_generate(s, NULL, 8, on_token, &a) >= LLM_OK);
        EXPECT(llm_session_create(m, &sp, &r) == LLM_OK);
        memset(&rio, 0, sizeof rio);
        rio.f = f;
        rio.fail_after = -1;
        memset(&io, 0, sizeof io);
        io.version = LLM_IO_VERSION;
        io.user = &rio;
        io.size = io_size;
        io.read_at = io_read_at;
        io.close = io_close;
        EXPECT(llm_session_load_io(r, &io) == LLM_OK);
        EXPECT(rio.closes == 1);
        memset(&b, 0, sizeof b);
        EXPECT(llm_session_generate(r, NULL, 8, on_token, &b) >= LLM_OK);
        EXPECT(a.len == b.len && memcmp(a.text, b.text, a.len) == 0);
        EXPECT(llm_session_load(r, path) == LLM_OK);
        memset(&b, 0, sizeof b);
        EXPECT(llm_session_generate(r, NULL, 8, on_token, &b) >= LLM_OK);
        EXPECT(a.len == b.len && memcmp(a.text, b.text, a.len) == 0);
        EXPECT(llm_session_load(r, "c_api_test.no-such-state") == LLM_ERR_IO);
        llm_session_free(r);
        fclose(f);
        remove(path);
    }

    /* cancel from a second thread during generation */
    {
        cancel_ctx cc;
        pthread_t th;
        memset(&cc, 0, sizeof cc);
        pthread_mutex_init(&cc.mu, NULL);
        pthread_cond_init(&cc.cv, NULL);
        cc.s = s;
        EXPECT(llm_session_reset(s) == LLM_OK);
        pthread_create(&th, NULL, canceller, &cc);
        st = llm_session_generate(s, "Once upon a time", 64, token_then_wait, &cc);
        pthread_join(th, NULL);
        EXPECT(st == LLM_ERR_CANCELLED);
        EXPECT(strstr(llm_last_error(), "cancel") != NULL);
        /* still usable after a reset */
        EXPECT(llm_session_reset(s) == LLM_OK);
        memset(&c, 0, sizeof c);
        st = llm_session_generate(s, "Once upon a time", 8, on_token, &c);
        EXPECT(st == LLM_OK && c.count == 8);
        pthread_mutex_destroy(&cc.mu);
        pthread_cond_destroy(&cc.cv);
    }

    /* embeddings: two texts in one call equal each alone; L2-normalised rows have norm 1; the
       session's context is untouched */
    {
        const char *texts[2] = {"Once upon a time", "there was a little girl"};
        llm_embed_params ep;
        size_t n = 0, n1 = 0, i;
        int32_t dim = 0, rows[2] = {0, 0}, past = llm_session_n_past(s);
        float *all, *one;
        double norm = 0.0;
        EXPECT(llm_embed_params_init(&ep, LLM_EMBED_PARAMS_VERSION) == LLM_OK);
        ep.pooling = LLM_POOLING_MEAN;
        ep.normalize = true;
        EXPECT(llm_session_embed(s, texts, 2, &ep, NULL, 0, &n, &dim, rows) == LLM_ERR_BUFFER_TOO_SMALL);
        EXPECT(dim > 0 && n == 2 * (size_t)dim && rows[0] == 1 && rows[1] == 1);
        all = (float *)malloc((n + 1) * sizeof *all);
        one = (float *)malloc((n + 1) * sizeof *one);
        EXPECT(all && one);
        if (all && one) {
            EXPECT(llm_session_embed(s, texts, 2, &ep, all, n, &n, &dim, rows) == LLM_OK);
            for (i = 0; i < (size_t)dim; ++i) norm += (double)all[i] * all[i];
            EXPECT(norm > 0.9999 && norm < 1.0001);
            EXPECT(llm_session_embed(s, texts + 1, 1, &ep, one, n, &n1, NULL, NULL) == LLM_OK);
            EXPECT(n1 == (size_t)dim && memcmp(one, all + dim, n1 * sizeof *one) == 0);
        }
        free(all);
        free(one);
        EXPECT(llm_session_n_past(s) == past);
    }
    llm_session_free(s);
    s = NULL;

    /* load through llm_io: same text as from the path */
    {
        file_io io_state;
        llm_io io;
        collect c2;
        memset(&io_state, 0, sizeof io_state);
        io_state.f = fopen(path, "rb");
        io_state.fail_after = -1;
        EXPECT(io_state.f != NULL);
        io.version = LLM_IO_VERSION;
        io.user = &io_state;
        io.size = io_size;
        io.read_at = io_read_at;
        io.close = io_close;
        io.flags = 0; /* version 2: every field must be set (or the struct zeroed) */
        EXPECT(llm_model_load_io(&io, NULL, &m2) == LLM_OK);
        EXPECT(io_state.closes == 0);
        EXPECT(llm_session_create(m2, &sp, &s) == LLM_OK);
        memset(&c2, 0, sizeof c2);
        st = llm_session_generate(s, "Once upon a time", 32, on_token, &c2);
        EXPECT(st == LLM_OK || st == LLM_DONE);
        EXPECT(strcmp(c2.text, c.len ? c2.text : "") == 0);
        EXPECT(strncmp(c2.text, ", there was a little girl named Lily", 36) == 0);
        llm_session_free(s);
        llm_model_free(m2);
        EXPECT(io_state.closes == 1);

        /* a failing read during load: LLM_ERR_IO and close called once */
        io_state.closes = 0;
        io_state.calls = 0;
        io_state.fail_after = 3;
        m2 = NULL;
        EXPECT(llm_model_load_io(&io, NULL, &m2) == LLM_ERR_IO);
        EXPECT(m2 == NULL);
        EXPECT(io_state.closes == 1);
        fclose(io_state.f);
    }

    llm_model_free(m);
    if (failures) {
        fprintf(stderr, "%d failures\n", failures);
        return 1;
    }
    printf("c_api_test: all checks passed\n");
    return 0;
}
