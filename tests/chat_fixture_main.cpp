// chat_fixture SRC.gguf DST.gguf: writes the ChatML chat model of chat_fixture.h (for tests/chat_tty_test.py).
#include <cstdio>
#include <exception>

#include "chat_fixture.h"

int main(int argc, char **argv) {
    if (argc != 3) {
        std::fprintf(stderr, "usage: chat_fixture SRC.gguf DST.gguf\n");
        return 2;
    }
    try {
        const chat_fixture::Ids ids = chat_fixture::write(argv[1], argv[2]);
        std::printf("{\"im_start\":%d,\"im_end\":%d}\n", ids.im_start, ids.im_end);
    } catch (const std::exception &e) {
        std::fprintf(stderr, "chat_fixture: %s\n", e.what());
        return 1;
    }
    return 0;
}
