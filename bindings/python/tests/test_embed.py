"""Session.embed against llama.cpp's pooled vectors (shared/embeddings) on the qwen3 fixture."""
import array
import json
import math
import os
import unittest

from tests.common import SHARED

import libllm_runtime as llm

EMBED = os.path.join(SHARED, "embeddings")
QWEN3 = os.path.join(SHARED, "fixtures", "models", "qwen3.f32.gguf")


def golden(name):
    with open(os.path.join(EMBED, name + ".json")) as f:
        g = json.load(f)
    raw = array.array("f")
    with open(os.path.join(EMBED, g["files"]["raw"]), "rb") as f:
        raw.frombytes(f.read())
    return g, raw


@unittest.skipUnless(os.path.exists(QWEN3) and llm.has("llm_session_embed"), "no qwen3 fixture or libllm < 0.4")
class Embed(unittest.TestCase):
    def setUp(self):
        self.model = llm.Model(QWEN3)
        self.s = llm.Session(self.model, n_ctx=256, kv_type_k=llm.KV_F32, kv_type_v=llm.KV_F32)

    def tearDown(self):
        self.s.close()
        self.model.close()

    def test_mean_golden_raw_and_normalised(self):
        g, raw = golden("qwen3.f32.mean")
        texts = [p["text"] for p in g["prompts"]]
        vecs = self.s.embed(texts, "mean")
        self.assertEqual(len(vecs), 4)
        for i, v in enumerate(vecs):
            self.assertIsInstance(v, array.array)
            self.assertEqual(v.typecode, "f")
            self.assertEqual(len(v), 256)
            self.assertLessEqual(max(abs(a - b) for a, b in zip(v, raw[i * 256:(i + 1) * 256])), 1e-4)
        unit = self.s.embed(texts, llm.POOLING_MEAN, normalize=True)
        for i, v in enumerate(unit):
            ref = raw[i * 256:(i + 1) * 256]
            cos = sum(a * b for a, b in zip(v, ref)) / math.sqrt(sum(b * b for b in ref))
            self.assertGreaterEqual(cos, 0.99999)

    def test_default_pooling_none_gives_token_rows(self):
        g, _ = golden("qwen3.f32.mean")
        self.assertEqual(llm.lib().llm_model_pooling_type(self.model.handle), llm.POOLING_NONE)
        (rows,) = self.s.embed(g["prompts"][0]["text"])
        self.assertEqual(len(rows), g["prompts"][0]["n_tokens"] * 256)

    def test_batch_equals_alone(self):
        g, _ = golden("qwen3.f32.last")
        texts = [p["text"] for p in g["prompts"]]
        together = self.s.embed(texts, "last", normalize=True)
        for t, v in zip(texts, together):
            self.assertEqual(self.s.embed([t], "last", normalize=True)[0].tobytes(), v.tobytes())

    def test_errors(self):
        with self.assertRaises(llm.Error) as e:
            self.s.embed(["fine", ""], "mean")
        self.assertEqual(e.exception.status, llm.ERR_INVALID_ARGUMENT)
        with self.assertRaises(llm.Error) as e:
            self.s.embed(["fine"], "rank")
        self.assertEqual(e.exception.status, llm.ERR_UNSUPPORTED)
        with self.assertRaises(llm.Error) as e:
            self.s.embed(["fine"], 9)
        self.assertEqual(e.exception.status, llm.ERR_INVALID_ARGUMENT)
        with self.assertRaises(llm.Error):
            self.s.embed(["fine"], "median")
        with self.assertRaises(llm.Error):
            self.s.embed([])
