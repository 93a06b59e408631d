/* The smallest complete libllm host, in C99 and nothing but llm.h: load a model, generate greedily
   from a prompt, print the text. Built against the installed library by the "install" test
   (find_package and pkg-config):
     cc hello.c $(pkg-config --cflags --libs llm) -o hello && ./hello model.gguf "Once upon a time" */
#include <llm.h>

#include <stdio.h>
#include <stdlib.h>

static bool print_piece(int32_t token, const char *piece, size_t len, void *user) {
    (void)token;
    (void)user;
    fwrite(piece, 1, len, stdout);
    return true;
}

int main(int argc, char **argv) {
    llm_model_params mp;
    llm_session_params sp;
    llm_model *m = NULL;
    llm_session *s = NULL;
    int32_t st;
    int n_tokens = argc > 3 ? atoi(argv[3]) : 32;

    if (argc < 2) {
        fprintf(stderr, "usage: hello MODEL.gguf [PROMPT] [N_TOKENS]\n");
        return 2;
    }
    llm_model_params_init(&mp, LLM_MODEL_PARAMS_VERSION);
    if (llm_model_load(argv[1], &mp, &m) != LLM_OK) {
        fprintf(stderr, "load failed: %s\n", llm_last_error());
        return 1;
    }
    llm_session_params_init(&sp, LLM_SESSION_PARAMS_VERSION);
    sp.temperature = 0.0f; /* greedy: the same text every run */
    if (llm_session_create(m, &sp, &s) != LLM_OK) {
        fprintf(stderr, "session failed: %s\n", llm_last_error());
        llm_model_free(m);
        return 1;
    }
    st = llm_session_generate(s, argc > 2 ? argv[2] : "Once upon a time", n_tokens, print_piece, NULL);
    printf("\n");
    if (st < 0) fprintf(stderr, "generate failed: %s (%s)\n", llm_status_string(st), llm_last_error());
    fprintf(stderr, "libllm %s\n", llm_version_string());
    llm_session_free(s);
    llm_model_free(m);
    return st < 0 ? 1 : 0;
}
