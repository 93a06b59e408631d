#!/usr/bin/env python3
"""llm-chat end to end (issue 15's done-when), in a real pseudo-terminal and over a pipe.

On a copy of the llama fixture with a ChatML template (chat_fixture), a two-turn chat at temperature 0
must give the tokens that rendering each conversation with llm-template and generating in one go with
llm-run --parse-special gives, and turn two must evaluate only what the session lacked: the full
rendering minus its longest common prefix with the tokens held after turn one (prompt + answer). The
counts come from llm-chat's --stats-json (the session's own prompt-token counter). Ctrl-C stops an
answer, and at the prompt ends llm-chat as SIGINT does.

Exit status 0 on success, 1 on a failed check, 77 when no pseudo-terminal can be opened.
"""
import argparse
import json
import os
import select
import signal
import subprocess
import sys
import time

N = 8  # tokens per answer: random weights rarely end a turn by themselves
SYSTEM = "You are a test."
# The first answer (on the x86 builds) round-trips 5 of its 8 tokens through text, so turn two reuses part
# of the answer as well as turn one's prompt; a random model's bytes often do not (they are not UTF-8).
TURNS = ["Lily went to the park", "Tell me a story"]
TIMEOUT = 120.0

failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)


class Tty:
    """A program on the slave side of a new pseudo-terminal (its controlling terminal, stdin, stdout
    and stderr), driven through the master side."""

    def __init__(self, argv):
        import pty
        self.pid, self.fd = pty.fork()
        if self.pid == 0:
            try:
                os.execv(argv[0], argv)
            finally:
                os._exit(127)
        self.out = b""
        self.status = None

    def _read(self, deadline):
        r, _, _ = select.select([self.fd], [], [], max(0.0, min(0.2, deadline - time.time())))
        if r:
            try:
                data = os.read(self.fd, 65536)
            except OSError:  # EIO: the slave side is closed
                data = b""
            if not data:
                return False
            self.out += data
        return True

    def expect(self, needle, start=0, timeout=TIMEOUT):
        """Reads until needle appears in the output after offset start; returns the offset past it."""
        deadline = time.time() + timeout
        while True:
            i = self.out.find(needle, start)
            if i >= 0:
                return i + len(needle)
            if time.time() > deadline or not self._read(deadline):
                raise RuntimeError("no %r in the terminal output:\n%s" % (needle, self.out.decode("utf-8", "replace")))

    def send(self, data):
        os.write(self.fd, data)

    def wait(self, timeout=TIMEOUT):
        deadline = time.time() + timeout
        while time.time() < deadline:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.status = status
                return status
            self._read(deadline)
        os.kill(self.pid, signal.SIGKILL)
        raise RuntimeError("llm-chat did not exit:\n" + self.out.decode("utf-8", "replace"))


def read_stats(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def reference(a, messages, name):
    """llm-template renders the conversation; llm-run generates from it in one go."""
    mpath = os.path.join(a.work, name + ".json")
    with open(mpath, "w", encoding="utf-8") as f:
        json.dump(messages, f, ensure_ascii=False)
    prompt = subprocess.run([a.template, "-m", a.model, "--messages", mpath, "--add-assistant"],
                            check=True, capture_output=True).stdout
    ppath = os.path.join(a.work, name + ".txt")
    with open(ppath, "wb") as f:
        f.write(prompt)
    out = subprocess.run([a.run, "-m", a.model, "-f", ppath, "--parse-special", "--temp", "0", "-n", str(N),
                          "--json"], check=True, capture_output=True).stdout
    return prompt.decode("utf-8"), json.loads(out)


def lcp(x, y):
    n = 0
    while n < len(x) and n < len(y) and x[n] == y[n]:
        n += 1
    return n


def chat_argv(a, stats, n=N, extra=()):
    return [a.chat, "-m", a.model, "--temp", "0", "-n", str(n), "--system", SYSTEM, "--stats-json", stats] + list(extra)


def hybrid_pipe(a):
    """Over a pipe on a ChatML copy of a hybrid fixture (recurrent layers): turn two gives llm-run's
    tokens on the full rendering and reuses the cached prefix; a recurrent state cannot be cut back,
    so when the prefix ends inside turn one's answer, the state comes back from the checkpoint taken
    at the end of turn one's prompt and only the answer's reused tokens are evaluated again."""
    model = os.path.join(a.work, "chatml-hybrid.gguf")
    subprocess.run([a.fixture, a.hybrid_src, model], check=True, capture_output=True)
    ha = argparse.Namespace(**vars(a))
    ha.model = model
    stats = os.path.join(a.work, "hybrid-pipe.jsonl")
    if os.path.exists(stats):
        os.remove(stats)
    r = subprocess.run(chat_argv(ha, stats), input=("\n".join(TURNS) + "\n").encode(), capture_output=True,
                       timeout=TIMEOUT)
    check(r.returncode == 0, "hybrid: llm-chat over a pipe exits 0 (%s)" % r.stderr.decode("utf-8", "replace")[-300:])
    turns = read_stats(stats)
    check(len(turns) == 2, "hybrid: two answers in --stats-json")
    if len(turns) != 2:
        return
    t1, t2 = turns
    conv = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": TURNS[0]}]
    _, r1 = reference(ha, conv, "hybrid-turn1")
    conv += [{"role": "assistant", "content": t1["reply"]}, {"role": "user", "content": TURNS[1]}]
    _, r2 = reference(ha, conv, "hybrid-turn2")
    check(t1["tokens"] == r1["tokens"], "hybrid turn 1: llm-chat's tokens == llm-run's")
    check(t2["tokens"] == r2["tokens"], "hybrid turn 2: llm-chat's tokens %s == llm-run's on the full rendering %s" %
          (t2["tokens"], r2["tokens"]))
    held = r1["prompt_ids"] + r1["tokens"]
    common = lcp(held, r2["prompt_ids"])
    if common == len(r2["prompt_ids"]):
        common -= 1
    check(common >= len(r1["prompt_ids"]), "hybrid: turn 1's whole prompt is shared (%d >= %d)" %
          (common, len(r1["prompt_ids"])))
    check(t2["reused_tokens"] == common, "hybrid turn 2 reuses the %d tokens shared with the cache" % common)
    check(t2["evaluated_prompt_tokens"] == len(r2["prompt_ids"]) - common,
          "hybrid turn 2 evaluates only the new suffix (%d of %d)" % (t2["evaluated_prompt_tokens"],
                                                                      len(r2["prompt_ids"])))
    # Truncated inside the answer: back to the checkpoint at turn one's prompt end; at the end of the
    # cache: nothing to recompute.
    want = 0 if common == len(held) else common - len(r1["prompt_ids"])
    check(t1["recomputed_tokens"] == 0 and t2["recomputed_tokens"] == want,
          "hybrid turn 2 recomputes %d tokens from the checkpoint at turn one's prompt end (%d of the %d reused)" %
          (t2["recomputed_tokens"], want, common))
    print("info: hybrid turn 2 reused %d tokens, recomputed %d" % (common, t2["recomputed_tokens"]))


def main():
    p = argparse.ArgumentParser()
    for k in ("chat", "run", "template", "fixture", "src", "work"):
        p.add_argument("--" + k, required=True)
    p.add_argument("--hybrid-src", help="a hybrid fixture (recurrent layers) for the pipe check too")
    a = p.parse_args()
    os.makedirs(a.work, exist_ok=True)
    a.model = os.path.join(a.work, "chatml.gguf")
    ids = json.loads(subprocess.run([a.fixture, a.src, a.model], check=True, capture_output=True).stdout)
    try:
        import pty  # noqa: F401
        master, slave = os.openpty()
        os.close(master)
        os.close(slave)
    except (ImportError, OSError) as e:
        print("skipped: no pseudo-terminal (%s)" % e)
        return 77

    # ---- two turns in a terminal ----
    stats_tty = os.path.join(a.work, "tty.jsonl")
    if os.path.exists(stats_tty):
        os.remove(stats_tty)
    t = Tty(chat_argv(a, stats_tty))
    pos = t.expect(b"> ")
    for i, line in enumerate(TURNS):
        t.send(line.encode() + b"\n")
        pos = t.expect(b" prompt tokens, ", pos)
        pos = t.expect(b"> ", pos)
    t.send(b"/quit\n")
    status = t.wait()
    check(os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, "llm-chat in a terminal exits 0 after /quit")
    turns = read_stats(stats_tty)
    check(len(turns) == 2, "two answers in --stats-json")
    if len(turns) != 2:
        return 1
    for tr in turns:
        check(("[%d prompt tokens, %d tokens, " % (tr["evaluated_prompt_tokens"], len(tr["tokens"]))).encode() in t.out,
              "turn %d: the terminal shows its tok/s line" % tr["turn"])

    # ---- the same conversations rendered and generated in one go ----
    conv = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": TURNS[0]}]
    _, r1 = reference(a, conv, "turn1")
    conv += [{"role": "assistant", "content": turns[0]["reply"]}, {"role": "user", "content": TURNS[1]}]
    prompt2, r2 = reference(a, conv, "turn2")
    check(prompt2.count("<|im_start|>") == 5 and ids["im_start"] in r2["prompt_ids"],
          "the rendering holds ChatML's special tokens, parsed as such")

    t1, t2 = turns
    check(t1["tokens"] == r1["tokens"], "turn 1: llm-chat's tokens %s == llm-run's %s" % (t1["tokens"], r1["tokens"]))
    check(t1["prompt_tokens"] == len(r1["prompt_ids"]) and t1["evaluated_prompt_tokens"] == len(r1["prompt_ids"]),
          "turn 1: the whole rendering (%d tokens) evaluated" % len(r1["prompt_ids"]))
    check(t2["tokens"] == r2["tokens"],
          "turn 2: llm-chat's tokens %s == llm-run's on the full rendering %s" % (t2["tokens"], r2["tokens"]))
    check(t2["prompt_tokens"] == len(r2["prompt_ids"]), "turn 2: the rendering has %d tokens" % len(r2["prompt_ids"]))

    held = r1["prompt_ids"] + r1["tokens"]  # the session after turn 1: its prompt and its answer
    check(t1["n_past"] == len(held), "after turn 1 the session holds prompt + answer (%d tokens)" % len(held))
    common = lcp(held, r2["prompt_ids"])
    if common == len(r2["prompt_ids"]):
        common -= 1  # the last token is evaluated again for its logits
    want = len(r2["prompt_ids"]) - common
    check(t2["reused_tokens"] == common, "turn 2 reuses the %d tokens shared with the cache" % common)
    check(t2["evaluated_prompt_tokens"] == want,
          "turn 2 evaluates only the new suffix: %d of %d tokens (session counter: %d)" %
          (want, len(r2["prompt_ids"]), t2["evaluated_prompt_tokens"]))
    check(common >= len(r1["prompt_ids"]), "turn 1's whole prompt is reused (%d >= %d)" % (common, len(r1["prompt_ids"])))
    print("info: turn 2 reused %d of turn 1's %d answer tokens" % (common - len(r1["prompt_ids"]), len(r1["tokens"])))

    # ---- the same over a pipe: no prompt decoration, the same tokens and counts ----
    stats_pipe = os.path.join(a.work, "pipe.jsonl")
    if os.path.exists(stats_pipe):
        os.remove(stats_pipe)
    r = subprocess.run(chat_argv(a, stats_pipe), input=("\n".join(TURNS) + "\n").encode(), capture_output=True,
                       timeout=TIMEOUT)
    check(r.returncode == 0, "llm-chat over a pipe exits 0 at end of input")
    check(b"> " not in r.stdout, "no prompt over a pipe")
    piped = read_stats(stats_pipe)
    keys = ("tokens", "prompt_tokens", "reused_tokens", "evaluated_prompt_tokens", "reply")
    check([{k: x[k] for k in keys} for x in piped] == [{k: x[k] for k in keys} for x in turns],
          "over a pipe: the same answers and counts as in the terminal")

    if a.hybrid_src:
        hybrid_pipe(a)

    # ---- Ctrl-C: stops an answer; at the prompt, ends llm-chat ----
    stats_int = os.path.join(a.work, "sigint.jsonl")
    if os.path.exists(stats_int):
        os.remove(stats_int)
    # A long answer, so that a loaded machine cannot finish it before the Ctrl-C arrives.
    long_n = 3000
    t = Tty(chat_argv(a, stats_int, n=long_n, extra=("--ctx", "4096")))
    pos = t.expect(b"> ")
    t.send(b"Go on and on\n")
    pos = t.expect(b"Go on and on\r\n", pos)
    while len(t.out) == pos:  # the answer's first bytes
        t._read(time.time() + TIMEOUT)
    t.send(b"\x03")
    pos = t.expect(b"> ", pos)
    stopped = read_stats(stats_int)
    check(b"[answer stopped]" in t.out and len(stopped) == 1 and stopped[0]["status"] == "cancelled"
          and 0 < len(stopped[0]["tokens"]) < long_n,
          "Ctrl-C stops the answer (%s tokens)" % (stopped[0]["tokens"].__len__() if stopped else "no"))
    t.send(b"\x03")
    status = t.wait()
    check(os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGINT, "Ctrl-C at the prompt ends llm-chat")

    print("%d failure(s)" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
