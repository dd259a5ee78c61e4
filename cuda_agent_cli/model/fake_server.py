"""A fake OpenAI-compatible chat server on 127.0.0.1 for tests and offline demos.

It answers POST /v1/chat/completions from a script of responses (text, tool calls, HTTP errors,
or a raw body sent with status 200, as a misbehaving server does), streams them as server-sent events when asked, and records every request body so a
test can assert exactly what litellm sent over the wire.

    with FakeOpenAIServer([reply_tool("Read", {"file_path": "model.py"}), reply_text("done")]) as srv:
        litellm.completion(model="openai/fake", api_base=srv.api_base, api_key="x", ...)
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Iterable, Iterator


@dataclass
class FakeReply:
    """One scripted response. `status` other than 200 sends an OpenAI-style error body."""

    content: str | None = None
    tool_calls: list[dict[str, Any]] = field(default_factory=list)  # {"name", "arguments": dict|str}
    status: int = 200
    error_message: str = ""
    error_code: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0  # wait this long before answering (lets a test kill a client mid-turn)
    prompt_tokens: int = 11
    completion_tokens: int = 7
    raw_body: str | None = None  # sent as it is with status 200 (a misbehaving server: HTML, cut JSON)
    raw_content_type: str = "application/json"


def reply_text(content: str, **kw: Any) -> FakeReply:
    return FakeReply(content=content, **kw)


def reply_tool(name: str, arguments: dict[str, Any] | str, content: str | None = None, **kw: Any) -> FakeReply:
    return FakeReply(content=content, tool_calls=[{"name": name, "arguments": arguments}], **kw)


def reply_error(
    status: int, message: str, code: str | None = None, retry_after: float | None = None, **kw: Any
) -> FakeReply:
    headers = {"retry-after": str(retry_after)} if retry_after is not None else {}
    return FakeReply(status=status, error_message=message, error_code=code, headers=headers, **kw)


def reply_raw(body: str, content_type: str = "application/json", **kw: Any) -> FakeReply:
    """An HTTP 200 answer whose body is `body` exactly, streamed or not: what a proxy's HTML page,
    a cut connection or a server with its own idea of the protocol sends."""
    return FakeReply(raw_body=body, raw_content_type=content_type, **kw)


def reply_from_dict(d: dict[str, Any]) -> FakeReply:
    """A reply from a JSON script line (the same shape as FakeReply's fields)."""
    known = set(FakeReply.__dataclass_fields__)
    return FakeReply(**{k: v for k, v in d.items() if k in known})


class FakeOpenAIServer:
    """Scripted OpenAI-compatible server; use as a context manager or call start()/stop().

    When the script runs out the server answers with `exhausted_text` and no tool call, so an
    agent session driven by it ends cleanly instead of hanging.
    """

    def __init__(self, script: Iterable[FakeReply] = (), exhausted_text: str = "Finished.") -> None:
        self._script: list[FakeReply] = list(script)
        self._lock = threading.Lock()
        self.exhausted_text = exhausted_text
        self.requests: list[dict[str, Any]] = []
        self.request_headers: list[dict[str, str]] = []
        self._httpd: ThreadingHTTPServer | None = None
        self._stopping = threading.Event()  # cuts scripted delays short on stop()
        self._thread: threading.Thread | None = None

    # -- script ------------------------------------------------------------------------------
    def add(self, *replies: FakeReply) -> None:
        with self._lock:
            self._script.extend(replies)

    def _next_reply(self, body: dict[str, Any], headers: dict[str, str]) -> tuple[FakeReply, int]:
        with self._lock:
            self.requests.append(body)
            self.request_headers.append(headers)
            n = len(self.requests)
            if self._script:
                return self._script.pop(0), n
        return FakeReply(content=self.exhausted_text), n

    # -- lifecycle ---------------------------------------------------------------------------
    @property
    def port(self) -> int:
        assert self._httpd is not None, "server not started"
        return self._httpd.server_address[1]

    @property
    def api_base(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self, port: int = 0) -> "FakeOpenAIServer":
        server = self

        class Handler(_Handler):
            fake = server

        self._stopping.clear()
        self._httpd = _QuietServer(("127.0.0.1", port), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="fake-openai", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> "FakeOpenAIServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _tool_call_json(i: int, n: int, call: dict[str, Any]) -> dict[str, Any]:
    args = call.get("arguments", {})
    return {
        "id": call.get("id") or f"call_{n}_{i}",
        "type": "function",
        "function": {"name": call["name"], "arguments": args if isinstance(args, str) else json.dumps(args)},
    }


def _completion_json(reply: FakeReply, n: int, model: str) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.content}
    if reply.tool_calls:
        message["tool_calls"] = [_tool_call_json(i, n, c) for i, c in enumerate(reply.tool_calls)]
    return {
        "id": f"chatcmpl-{n}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if reply.tool_calls else "stop"}],
        "usage": _usage(reply),
    }


def _usage(reply: FakeReply) -> dict[str, int]:
    return {
        "prompt_tokens": reply.prompt_tokens,
        "completion_tokens": reply.completion_tokens,
        "total_tokens": reply.prompt_tokens + reply.completion_tokens,
    }


def _stream_chunks(reply: FakeReply, n: int, model: str, include_usage: bool) -> Iterator[dict[str, Any]]:
    base = {"id": f"chatcmpl-{n}", "object": "chat.completion.chunk", "created": int(time.time()), "model": model}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    yield chunk({"role": "assistant", "content": ""})
    text = reply.content or ""
    # Several small pieces, like a real server, so clients must join deltas.
    step = max(1, len(text) // 3)
    for start in range(0, len(text), step):
        yield chunk({"content": text[start : start + step]})
    for i, call in enumerate(reply.tool_calls):
        full = _tool_call_json(i, n, call)
        args = full["function"]["arguments"]
        half = len(args) // 2
        yield chunk(
            {
                "tool_calls": [
                    {
                        "index": i,
                        "id": full["id"],
                        "type": "function",
                        "function": {"name": full["function"]["name"], "arguments": args[:half]},
                    }
                ]
            }
        )
        yield chunk({"tool_calls": [{"index": i, "function": {"arguments": args[half:]}}]})
    yield chunk({}, "tool_calls" if reply.tool_calls else "stop")
    if include_usage:
        yield {**base, "choices": [], "usage": _usage(reply)}


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that hung up mid-reply (a killed test process) is expected here


class _Handler(BaseHTTPRequestHandler):
    fake: FakeOpenAIServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
        pass

    def _send_json(self, status: int, obj: dict[str, Any], headers: dict[str, str] | None = None) -> None:
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        if self.path.rstrip("/").endswith("/models"):
            self._send_json(200, {"object": "list", "data": [{"id": "fake", "object": "model"}]})
        else:
            self._send_json(404, {"error": {"message": "not found", "type": "invalid_request_error"}})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if not self.path.rstrip("/").endswith("/chat/completions"):
            self._send_json(404, {"error": {"message": f"no route {self.path}", "type": "invalid_request_error"}})
            return
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            self._send_json(400, {"error": {"message": "request body is not JSON", "type": "invalid_request_error"}})
            return
        reply, n = self.fake._next_reply(body, {k.lower(): v for k, v in self.headers.items()})
        if reply.delay_s and self.fake._stopping.wait(reply.delay_s):
            return
        model = str(body.get("model") or "fake")
        if reply.status != 200:
            err = {
                "message": reply.error_message or f"error {reply.status}",
                "type": "invalid_request_error",
                "param": None,
                "code": reply.error_code,
            }
            self._send_json(reply.status, {"error": err}, reply.headers)
            return
        if reply.raw_body is not None:
            data = reply.raw_body.encode()
            self.send_response(200)
            self.send_header("Content-Type", reply.raw_content_type)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        if not body.get("stream"):
            self._send_json(200, _completion_json(reply, n, model), reply.headers)
            return
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        for obj in _stream_chunks(reply, n, model, include_usage):
            self.wfile.write(b"data: " + json.dumps(obj).encode() + b"\n\n")
            self.wfile.flush()
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()
        self.close_connection = True


def main(argv: list[str] | None = None) -> None:
    """Serve a JSONL script (one FakeReply dict a line) until killed; prints the api_base."""
    parser = argparse.ArgumentParser(description="Scripted OpenAI-compatible server on 127.0.0.1.")
    parser.add_argument("script", nargs="?", help="JSONL file of replies")
    parser.add_argument("--port", type=int, default=0)
    ns = parser.parse_args(argv)
    replies: list[FakeReply] = []
    if ns.script:
        with open(ns.script, encoding="utf-8") as fh:
            replies = [reply_from_dict(json.loads(line)) for line in fh if line.strip()]
    server = FakeOpenAIServer(replies).start(ns.port)
    print(server.api_base, flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        server.stop()


if __name__ == "__main__":
    main()
