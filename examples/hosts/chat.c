/* A streaming chat host in C99 that uses nothing but llm.h: every line on stdin is a user turn; the
   whole conversation is rendered with the model's chat template and the answer streams out as it is
   generated, until end of input. A model without a template gets each line as raw text that continues
   the context. (llm-chat, examples/tools, is the full tool: it keeps the cached prefix between turns
   instead of evaluating the conversation again, and takes a system prompt, sampling flags and Ctrl-C.)
     cc chat.c $(pkg-config --cflags --libs llm) -o chat && ./chat model.gguf < questions.txt */
#include <llm.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *copy(const char *s) {
    char *d = malloc(strlen(s) + 1);
    if (d) strcpy(d, s);
    return d;
}

/* Templates take well-formed UTF-8 only, which an answer cut by the token limit (or a line cut by
   the buffer) may not be: every byte that does not start a well-formed sequence (no overlongs,
   surrogates or code points past U+10FFFF) becomes '?'. */
static char *repair_utf8(char *text) {
    unsigned char *p = (unsigned char *)text;
    while (p && *p) {
        size_t n = 0, k;
        unsigned char lo = 0x80, hi = 0xBF; /* the allowed range of the second byte */
        if (*p < 0x80) n = 1;
        if (*p >= 0xC2 && *p <= 0xDF) n = 2;
        if (*p >= 0xE0 && *p <= 0xEF) n = 3, lo = *p == 0xE0 ? 0xA0 : 0x80, hi = *p == 0xED ? 0x9F : 0xBF;
        if (*p >= 0xF0 && *p <= 0xF4) n = 4, lo = *p == 0xF0 ? 0x90 : 0x80, hi = *p == 0xF4 ? 0x8F : 0xBF;
        for (k = 1; k < n; k++) /* a NUL is out of every range: nothing past the end is read */
            if (p[k] < (k == 1 ? lo : 0x80) || p[k] > (k == 1 ? hi : 0xBF)) n = 0;
        if (n == 0) *p = '?';
        p += n ? n : 1;
    }
    return text;
}

/* Streams each piece and appends it to the answer (a NUL-terminated string the next turn renders). */
static bool on_piece(int32_t token, const char *piece, size_t len, void *user) {
    char **answer = user;
    size_t have = *answer ? strlen(*answer) : 0;
    char *grown = realloc(*answer, have + len + 1);
    (void)token;
    if (!grown) return false;
    memcpy(grown + have, piece, len);
    grown[have + len] = '\0';
    *answer = grown;
    fwrite(piece, 1, len, stdout);
    fflush(stdout);
    return true;
}

int main(int argc, char **argv) {
    llm_model_params mp;
    llm_session_params sp;
    llm_model *m = NULL;
    llm_session *s = NULL;
    llm_chat_message msgs[64]; /* 32 turns; a longer chat ends (llm-chat has no such limit) */
    size_t n_msgs = 0, len = 0;
    char line[4096];
    int32_t st = LLM_OK;

    if (argc < 2) {
        fprintf(stderr, "usage: chat MODEL.gguf [MAX_TOKENS] < turns.txt\n");
        return 2;
    }
    llm_model_params_init(&mp, LLM_MODEL_PARAMS_VERSION);
    llm_session_params_init(&sp, LLM_SESSION_PARAMS_VERSION);
    sp.temperature = 0.0f;   /* greedy: the same answer every run (llm-chat takes sampling flags) */
    sp.parse_special = true; /* the rendering's control-token text (e.g. "<|im_start|>") becomes those tokens */
    if (llm_model_load(argv[1], &mp, &m) != LLM_OK || llm_session_create(m, &sp, &s) != LLM_OK) {
        fprintf(stderr, "chat: %s\n", llm_last_error());
        llm_model_free(m);
        return 1;
    }
    while (st >= 0 && n_msgs + 2 <= sizeof msgs / sizeof msgs[0] && fgets(line, sizeof line, stdin)) {
        char *prompt = NULL, *answer = copy("");
        line[strcspn(line, "\n")] = '\0';
        msgs[n_msgs].role = "user";
        msgs[n_msgs++].content = repair_utf8(copy(line));
        /* Ask for the size, then render; LLM_ERR_NOT_FOUND: the model has no template, use the line. */
        st = llm_chat_apply_template(m, NULL, msgs, n_msgs, true, NULL, 0, &len);
        if (st == LLM_ERR_BUFFER_TOO_SMALL && (prompt = malloc(len + 1)) != NULL) {
            st = llm_chat_apply_template(m, NULL, msgs, n_msgs, true, prompt, len + 1, &len);
            if (st == LLM_OK) st = llm_session_reset(s); /* the rendering holds the whole conversation */
        } else if (st == LLM_ERR_NOT_FOUND) {
            prompt = copy(line);
            st = LLM_OK;
        }
        if (st == LLM_OK) st = llm_session_generate(s, prompt, argc > 2 ? atoi(argv[2]) : 256, on_piece, &answer);
        printf("\n");
        if (st < 0) fprintf(stderr, "chat: %s (%s)\n", llm_status_string(st), llm_last_error());
        msgs[n_msgs].role = "assistant";
        msgs[n_msgs++].content = repair_utf8(answer);
        free(prompt);
    }
    while (n_msgs > 0) free((char *)msgs[--n_msgs].content);
    llm_session_free(s);
    llm_model_free(m);
    return st < 0 ? 1 : 0;
}
