#!/usr/bin/env python3
"""chat_fixture.py SRC.gguf DST.gguf: a chat model for the bindings' tests (standard library only).

Copies SRC (stories260K: SentencePiece vocabulary with byte tokens) and makes it an instruct model
in the ChatML style: the byte tokens <0x01> and <0x02>, which no text uses, become the control tokens
<|im_start|> and <|im_end|> (<|im_end|> is also EOS), and tokenizer.chat_template holds a ChatML
template (tokenizer.chat_template.tool_use a second one showing bos_token/eos_token). So a rendered
conversation tokenizes differently with and without parse_special. The same construction as
tests/chat_fixture.h, written again here so the bindings' run_tests.sh need no C++ tool.

Prints {"im_start": id, "im_end": id} as JSON.
"""
import json
import os
import struct
import sys

CHATML = ("{% for message in messages %}"
          "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
          "{% endfor %}"
          "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")
NAMED = "{{ bos_token }}{% for m in messages %}[{{ m.role }}]{{ m.content }}{% endfor %}{{ eos_token }}"

STRING, ARRAY, UINT32, INT32 = 8, 9, 4, 5
SCALAR_SIZE = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}


class Reader:
    def __init__(self, data):
        self.data, self.pos = data, 0

    def take(self, fmt):
        v = struct.unpack_from("<" + fmt, self.data, self.pos)
        self.pos += struct.calcsize("<" + fmt)
        return v[0] if len(v) == 1 else v

    def string(self):
        n = self.take("Q")
        s = self.data[self.pos:self.pos + n].decode("utf-8")
        self.pos += n
        return s

    def value(self, t):
        """The value of type t: str, list (arrays, with their element type), or a number as raw bytes."""
        if t == STRING:
            return self.string()
        if t == ARRAY:
            et, n = self.take("I"), self.take("Q")
            return (et, [self.value(et) for _ in range(n)])
        raw = self.data[self.pos:self.pos + SCALAR_SIZE[t]]
        self.pos += SCALAR_SIZE[t]
        return raw


def enc_string(s):
    b = s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def enc_value(t, v):
    if t == STRING:
        return enc_string(v)
    if t == ARRAY:
        et, items = v
        return struct.pack("<IQ", et, len(items)) + b"".join(enc_value(et, x) for x in items)
    return v


def main(src, dst):
    data = open(src, "rb").read()
    r = Reader(data)
    magic, version, n_tensors, n_kv = r.take("4s"), r.take("I"), r.take("Q"), r.take("Q")
    if magic != b"GGUF" or version != 3:
        sys.exit("%s: not a GGUF v3 file" % src)
    kvs = []
    for _ in range(n_kv):
        key = r.string()
        t = r.take("I")
        kvs.append([key, t, r.value(t)])
    infos_start = r.pos
    for _ in range(n_tensors):
        r.string()
        n_dims = r.take("I")
        r.pos += 8 * n_dims + 4 + 8  # dims, type, offset
    infos = data[infos_start:r.pos]
    meta = {k: (t, v) for k, t, v in kvs}
    alignment = struct.unpack("<I", meta["general.alignment"][1])[0] if "general.alignment" in meta else 32
    data_start = (r.pos + alignment - 1) // alignment * alignment

    tokens = meta["tokenizer.ggml.tokens"][1][1]
    types = [struct.unpack("<i", x)[0] for x in meta["tokenizer.ggml.token_type"][1][1]]
    im_start, im_end = tokens.index("<0x01>"), tokens.index("<0x02>")
    tokens[im_start], tokens[im_end] = "<|im_start|>", "<|im_end|>"
    types[im_start] = types[im_end] = 3  # CONTROL
    replaced = {
        "tokenizer.ggml.tokens": (ARRAY, (STRING, tokens)),
        "tokenizer.ggml.token_type": (ARRAY, (INT32, [struct.pack("<i", x) for x in types])),
        "tokenizer.ggml.eos_token_id": (UINT32, struct.pack("<I", im_end)),
        "tokenizer.chat_template": (STRING, CHATML),
        "tokenizer.chat_template.tool_use": (STRING, NAMED),
    }
    out_kvs = [(k, replaced.pop(k) if k in replaced else (t, v)) for k, t, v in kvs] + list(replaced.items())
    head = b"GGUF" + struct.pack("<IQQ", 3, n_tensors, len(out_kvs))
    head += b"".join(enc_string(k) + struct.pack("<I", t) + enc_value(t, v) for k, (t, v) in out_kvs)
    head += infos
    head += b"\0" * (-len(head) % alignment)
    with open(dst + ".tmp", "wb") as f:
        f.write(head)
        f.write(data[data_start:])
    os.replace(dst + ".tmp", dst)
    print(json.dumps({"im_start": im_start, "im_end": im_end}))


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: chat_fixture.py SRC.gguf DST.gguf")
    main(sys.argv[1], sys.argv[2])
