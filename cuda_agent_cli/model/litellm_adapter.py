"""The litellm adapter: the one place that talks to model APIs.

Streams every response, assembles tool-call deltas, falls back to the text tool-call protocol
for models without native tools, retries transient failures with backoff, and prices each turn.
"""

from __future__ import annotations

import json
import os
import random
import re
import socket
import time
from typing import Any, Callable, NoReturn, Sequence

# litellm must never fetch its price map over the network when imported.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from cuda_agent_cli.errors import (  # noqa: E402
    ContextOverflow,
    EnvironmentMissing,
    ModelConfigError,
    ModelUnavailable,
)
from cuda_agent_cli.model.port import (  # noqa: E402
    AssistantTurn,
    RetryCallback,
    TextCallback,
    ToolCall,
    Usage,
    approx_tokens,
)
from cuda_agent_cli.model.textproto import (  # noqa: E402
    OPEN,
    CallBlockFilter,
    parse_text_tool_calls,
    to_text_messages,
    tool_index,
)

# Anthropic models cache a marked prompt prefix: the system prompt (SKILL.md) and the conversation
# up to the last message are re-read at a tenth of the price on the next turn.
CACHE_POINTS = [{"location": "message", "role": "system"}, {"location": "message", "index": -1}]
CACHING_PROVIDERS = frozenset({"anthropic", "bedrock", "vertex_ai"})

# Providers that run on the user's own hardware: their turns cost nothing.
LOCAL_PROVIDERS = frozenset({"hosted_vllm", "vllm", "ollama", "ollama_chat", "lm_studio", "llamafile", "openai_like"})


def _import_litellm() -> Any:
    import litellm

    litellm.suppress_debug_info = True
    return litellm


def _retry_after(exc: BaseException) -> float | None:
    """Seconds the server asked us to wait, from a Retry-After header when it sent one."""
    for holder in (getattr(exc, "response", None), exc):
        headers = getattr(holder, "headers", None)
        if not headers:
            continue
        try:
            value = headers.get("retry-after") or headers.get("Retry-After")
        except Exception:
            continue
        if value is None:
            continue
        try:
            return max(0.0, float(value))
        except ValueError:
            return None
    return None


def backoff_delay(attempt: int, base: float, cap: float, retry_after: float | None, rng: random.Random) -> float:
    """Exponential backoff with full jitter; a server's Retry-After wins, but never past `cap`."""
    if retry_after is not None:
        return min(retry_after, cap)
    return min(cap, base * (2 ** (attempt - 1))) * (0.5 + rng.random() / 2)


class LiteLLMModel:
    """A ModelPort over litellm.completion.

    native_tools: True/False forces the protocol; None decides from litellm's model map
    (native for an OpenAI-compatible `api_base` or a model litellm says has tools).
    """

    def __init__(
        self,
        model: str,
        api_base: str | None = None,
        api_key: str | None = None,
        native_tools: bool | None = None,
        max_retries: int = 5,
        backoff_base: float = 1.0,
        backoff_cap: float = 60.0,
        request_timeout: float = 600.0,
        temperature: float | None = None,
        extra: dict[str, Any] | None = None,
        on_retry: RetryCallback | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._litellm = _import_litellm()
        self.name = model
        self.api_base = api_base
        self.api_key = api_key
        self.max_retries = max_retries
        self.backoff_base = backoff_base
        self.backoff_cap = backoff_cap
        self.request_timeout = request_timeout
        self.temperature = temperature
        self.extra = dict(extra or {})
        self.on_retry = on_retry
        self._sleep = sleep
        self._rng = random.Random()
        self._reached = False  # a server that never answered is more likely misconfigured than busy
        try:
            self.provider = self._litellm.get_llm_provider(model, api_base=api_base)[1]
        except Exception:
            raise ModelConfigError(
                f"litellm does not know the model {model!r}",
                "use a provider-prefixed string such as anthropic/claude-sonnet-4-5, openai/gpt-4.1, "
                "hosted_vllm/NAME with --api-base, or replay:FILE.jsonl",
            ) from None
        self._forced = native_tools is not None
        self.native_tools = native_tools if native_tools is not None else self._detect_native()
        self.free = bool(api_base) or self.provider in LOCAL_PROVIDERS
        self.context_window = self._detect_window()

    # -- capabilities ------------------------------------------------------------------------
    def _detect_native(self) -> bool:
        if self.api_base:
            return True
        try:
            return bool(self._litellm.supports_function_calling(self.name))
        except Exception:
            # Unmapped model: try native; a server that refuses tools switches us to text.
            return True

    def _detect_window(self) -> int | None:
        try:
            info = self._litellm.get_model_info(self.name)
        except Exception:
            return None
        window = info.get("max_input_tokens") or info.get("max_tokens")
        return int(window) if window else None

    def count_tokens(self, messages: Sequence[dict[str, Any]]) -> int:
        try:
            return int(self._litellm.token_counter(model=self.name, messages=list(messages)))
        except Exception:
            return approx_tokens(messages)

    @property
    def prompt_caching(self) -> bool:
        return self.provider in CACHING_PROVIDERS and "claude" in self.name.lower()

    def _cost(self, usage: Usage, raw_usage: Any = None) -> float:
        if self.free:
            return 0.0
        try:
            # The provider's usage object carries cache reads and writes, priced differently.
            p, c = self._litellm.cost_per_token(
                model=self.name,
                prompt_tokens=usage.prompt_tokens,
                completion_tokens=usage.completion_tokens,
                usage_object=raw_usage,
            )
            return float(p) + float(c)
        except Exception:
            return 0.0

    # -- the call ----------------------------------------------------------------------------
    def complete(
        self,
        messages: Sequence[dict[str, Any]],
        tools: Sequence[dict[str, Any]],
        on_text: TextCallback | None = None,
    ) -> AssistantTurn:
        attempt = 0
        while True:
            attempt += 1
            try:
                turn = self._complete_once(messages, tools, on_text)
                self._reached = True
                return turn
            except Exception as exc:
                if self._switch_to_text(exc, tools):
                    attempt -= 1
                    continue
                self._refuse_unreachable(exc)
                reason = self._classify(exc)  # raises for errors that retrying cannot fix
                unreachable = reason == "could not reach the server"
                # A wrong --api-base should fail in seconds, not after a minute of backoff.
                limit = min(self.max_retries, 1) if unreachable and not self._reached else self.max_retries
                if attempt > limit:
                    where = f" at {self.api_base}" if unreachable and self.api_base else ""
                    hint = (
                        "check that the server is running and --api-base is right"
                        if unreachable and not self._reached
                        else "check the server or your rate limits, then rerun with --resume or --continue"
                    )
                    raise ModelUnavailable(
                        f"{self.name}: {reason}{where} after {attempt} attempts: {_short(exc)}", hint
                    ) from None
                wait = backoff_delay(attempt, self.backoff_base, self.backoff_cap, _retry_after(exc), self._rng)
                if self.on_retry:
                    self.on_retry(attempt, wait, reason)
                self._sleep(wait)

    def _switch_to_text(self, exc: Exception, tools: Sequence[dict[str, Any]]) -> bool:
        """A server that rejects the tools parameter (vLLM without a tool parser, for one) gets
        the text protocol instead, unless the user forced native tools."""
        lt = self._litellm
        if self._forced or not self.native_tools or not tools:
            return False
        if isinstance(exc, lt.ContextWindowExceededError) or not isinstance(
            exc, (lt.BadRequestError, lt.UnprocessableEntityError)
        ):
            return False
        if "tool" not in str(exc).lower() or _mentions_context_limit(str(exc)):
            return False
        self.native_tools = False
        return True

    def _refuse_unreachable(self, exc: Exception) -> None:
        """A host whose name does not resolve, or that refuses the connection, is not retried:
        waiting does not fix a wrong --api-base or a machine without a network."""
        found = unreachable_cause(exc)
        if found is None:
            return
        why, host = found
        host = host or _host_of(self.api_base) or f"the {self.provider} API"
        if why == "unresolvable":
            problem = f"cannot reach {host}: the name does not resolve"
            hint = (
                "check the network connection"
                if not self.api_base
                else "check the host name in --api-base and the network connection"
            )
        elif why == "refused":
            problem = f"cannot reach {host}: the connection was refused"
            hint = (
                "check that the server is running and --api-base is right"
                if self.api_base
                else "check the network connection (a proxy or firewall may be refusing it)"
            )
        else:
            problem = f"cannot reach {host}: no route to the host"
            hint = "check the network connection"
        if self._reached:
            hint += "; the session so far is saved: rerun with --resume or --continue"
        raise ModelUnavailable(f"{self.name}: {problem} (host unreachable)", hint) from None

    def _classify(self, exc: Exception) -> str:
        """The reason to retry `exc`, or raise the cuda-agent error it really is."""
        lt = self._litellm
        if isinstance(exc, lt.ContextWindowExceededError) or (
            isinstance(exc, lt.BadRequestError) and _mentions_context_limit(str(exc))
        ):
            raise ContextOverflow(
                f"{self.name}: the conversation exceeds the model's context window: {_short(exc)}",
                "lower --context-tokens or use a model with a larger window",
            ) from None
        if isinstance(exc, lt.RateLimitError):
            return "rate limited"
        if isinstance(exc, (lt.InternalServerError, lt.APIError)) and _mentions_connection(str(exc)):
            return "could not reach the server"  # litellm reports a refused connection as a 500
        if isinstance(exc, (lt.Timeout, lt.APIConnectionError)):
            return "could not reach the server" if isinstance(exc, lt.APIConnectionError) else "timed out"
        if isinstance(exc, (lt.ServiceUnavailableError, lt.InternalServerError, lt.BadGatewayError)):
            return "server error"
        if isinstance(exc, (lt.AuthenticationError, lt.PermissionDeniedError)):
            raise EnvironmentMissing(
                f"{self.name}: the provider rejected the credentials: {_short(exc)}", self._key_hint()
            ) from None
        if isinstance(exc, lt.NotFoundError):
            raise ModelConfigError(
                f"{self.name}: the provider does not know this model: {_short(exc)}",
                "check the model name (and --api-base for a local server)",
            ) from None
        if isinstance(exc, (lt.BadRequestError, lt.UnprocessableEntityError)):
            raise ModelConfigError(
                f"{self.name}: the provider refused the request: {_short(exc)}", "check the model string and --api-base"
            ) from None
        if isinstance(exc, lt.APIError):
            return "API error"
        raise exc

    def _key_hint(self) -> str:
        try:
            missing = self._litellm.validate_environment(model=self.name).get("missing_keys") or []
        except Exception:
            missing = []
        if missing:
            return f"set {' and '.join(missing)} in the environment"
        if self.api_base:
            return "pass the server's key in OPENAI_API_KEY (or the provider's key variable)"
        return f"check the API key variable for provider {self.provider}"

    def _request(self, messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]]) -> dict[str, Any]:
        kwargs: dict[str, Any] = {
            "model": self.name,
            "stream": True,
            "stream_options": {"include_usage": True},
            "timeout": self.request_timeout,
            "max_retries": 0,  # we retry ourselves, with backoff the user can see
            "drop_params": True,
            **self.extra,
        }
        if self.api_base:
            kwargs["api_base"] = self.api_base
        key = self.api_key or os.environ.get("CUDA_AGENT_API_KEY")
        if key:
            kwargs["api_key"] = key
        elif self.api_base and self.provider == "openai" and not os.environ.get("OPENAI_API_KEY"):
            kwargs["api_key"] = "no-key"  # local OpenAI-compatible servers accept any key
        if self.temperature is not None:
            kwargs["temperature"] = self.temperature
        if self.prompt_caching:
            kwargs["cache_control_injection_points"] = CACHE_POINTS
        if self.native_tools:
            kwargs["messages"] = list(messages)
            if tools:
                kwargs["tools"] = list(tools)
        else:
            kwargs["messages"] = to_text_messages(messages, tools)
        return kwargs

    def _complete_once(
        self, messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]], on_text: TextCallback | None
    ) -> AssistantTurn:
        kwargs = self._request(messages, tools)
        native = self.native_tools
        stream = self._litellm.completion(**kwargs)
        text_parts: list[str] = []
        calls: dict[int, dict[str, str]] = {}
        usage: Usage | None = None
        raw_usage: Any = None
        heard = False  # the server sent something of a chat completion (litellm adds a closing chunk itself)
        shown = CallBlockFilter(on_text) if on_text else None
        for chunk in stream:
            u = getattr(chunk, "usage", None)
            if u and (getattr(u, "prompt_tokens", 0) or getattr(u, "completion_tokens", 0)):
                usage = Usage(int(u.prompt_tokens or 0), int(u.completion_tokens or 0))
                raw_usage = u
                heard = True
            if not chunk.choices:
                continue
            delta = chunk.choices[0].delta
            piece = getattr(delta, "content", None)
            if piece is not None or getattr(delta, "role", None) or getattr(delta, "tool_calls", None):
                heard = True
            if piece:
                text_parts.append(piece)
                if shown:
                    shown.feed(piece)
            for tc in getattr(delta, "tool_calls", None) or ():
                slot = calls.setdefault(int(getattr(tc, "index", 0) or 0), {"id": "", "name": "", "arguments": ""})
                if getattr(tc, "id", None):
                    slot["id"] = tc.id
                fn = getattr(tc, "function", None)
                if fn is not None:
                    if getattr(fn, "name", None):
                        slot["name"] += fn.name
                    if getattr(fn, "arguments", None):
                        slot["arguments"] += fn.arguments
        if not heard:
            return self._without_stream(kwargs, tools, native, on_text, _content_type(stream))
        if shown:
            shown.flush()
        return self._turn(kwargs, tools, native, "".join(text_parts), calls, usage, raw_usage)

    def _turn(
        self,
        kwargs: dict[str, Any],
        tools: Sequence[dict[str, Any]],
        native: bool,
        text: str,
        calls: dict[int, dict[str, str]],
        usage: Usage | None,
        raw_usage: Any,
    ) -> AssistantTurn:
        tool_calls = [_native_call(calls[i], i) for i in sorted(calls)]
        if not tool_calls and (not native or OPEN in text):
            # Text protocol, or a server that ignored the tools and let the model write calls.
            index = tool_index(tools)
            text, tool_calls = parse_text_tool_calls(text, index)
        if usage is None:
            usage = Usage(self.count_tokens(kwargs["messages"]), max(1, len(text) // 4))
        return AssistantTurn(
            content=text or None, tool_calls=tool_calls, usage=usage, cost_usd=self._cost(usage, raw_usage)
        )

    def _without_stream(
        self,
        kwargs: dict[str, Any],
        tools: Sequence[dict[str, Any]],
        native: bool,
        on_text: TextCallback | None,
        content_type: str | None,
    ) -> AssistantTurn:
        """An HTTP 200 answer to the streamed request that held nothing of a chat completion: an
        HTML page, a body cut short, an empty `choices` list, or a server that does not stream.
        Asked once more without streaming, the server either gives the turn or shows what it
        sends; a model that merely had nothing to say never ends up here."""
        plain = {k: v for k, v in kwargs.items() if k not in ("stream", "stream_options")}
        try:
            response = self._litellm.completion(**plain)
        except Exception as exc:
            lt = self._litellm
            settled = (lt.AuthenticationError, lt.PermissionDeniedError, lt.RateLimitError, lt.Timeout)
            if unreachable_cause(exc) is not None or isinstance(exc, settled):
                raise  # the usual path: a server that went away, a rejected key, a rate limit
            self._bad_answer(content_type, _what_was_received(exc))
        choices = getattr(response, "choices", None) or []
        message = getattr(choices[0], "message", None) if choices else None
        if message is None:
            self._bad_answer(content_type, "a completion with an empty `choices` list")
        text = getattr(message, "content", None) or ""
        if text and on_text:
            shown = CallBlockFilter(on_text)
            shown.feed(text)
            shown.flush()
        calls: dict[int, dict[str, str]] = {}
        for i, tc in enumerate(getattr(message, "tool_calls", None) or ()):
            fn = getattr(tc, "function", None)
            calls[i] = {
                "id": str(getattr(tc, "id", "") or ""),
                "name": str(getattr(fn, "name", "") or ""),
                "arguments": str(getattr(fn, "arguments", "") or ""),
            }
        u = getattr(response, "usage", None)
        usage = (
            Usage(int(u.prompt_tokens or 0), int(u.completion_tokens or 0))
            if u and (getattr(u, "prompt_tokens", 0) or getattr(u, "completion_tokens", 0))
            else None
        )
        return self._turn(kwargs, tools, native, text, calls, usage, u)

    def _bad_answer(self, content_type: str | None, what: str) -> NoReturn:
        server = f"the server at {self.api_base}" if self.api_base else f"the {self.provider} API"
        sent = f"HTTP 200 with {content_type}" if content_type else "HTTP 200"
        hint = (
            "check that --api-base is the server's OpenAI-compatible URL (usually ending in /v1) and that the server is healthy"
            if self.api_base
            else "the provider, or a proxy on the way, sent a broken answer: try again later"
        )
        if self._reached:
            hint += "; the session so far is saved: rerun with --resume or --continue"
        raise ModelUnavailable(f"{self.name}: {server} answered {sent}, not a chat completion: {what}", hint) from None


def _content_type(stream: Any) -> str | None:
    """The Content-Type of a streamed answer, as litellm keeps the response's headers."""
    try:
        headers = (getattr(stream, "_hidden_params", None) or {}).get("additional_headers") or {}
        value = headers.get("llm_provider-content-type")
    except Exception:
        return None
    return str(value).split(";")[0].strip() or None if value else None


_RECEIVED = re.compile(r"Received: '(.*?)'\. Check", re.S)
_BAD_JSON = re.compile(r"error - (.*?), Received response", re.S)


def _what_was_received(exc: BaseException, limit: int = 120) -> str:
    """What litellm says the server sent, briefly: the start of the body, or why it is not JSON."""
    text = str(exc)
    body = _RECEIVED.search(text)
    if body:
        seen = " ".join(body.group(1).split())
        return f"{seen[:limit]}…" if len(seen) > limit else seen or "an empty body"
    bad = _BAD_JSON.search(text)
    if bad:
        return f"a body that is not valid JSON ({bad.group(1).strip()})"
    return _short(exc, 200)


def _native_call(slot: dict[str, str], index: int) -> ToolCall:
    cid = slot["id"] or f"call_{index}_{random.getrandbits(32):08x}"
    raw = slot["arguments"].strip() or "{}"
    try:
        args = json.loads(raw)
    except json.JSONDecodeError as exc:
        return ToolCall(
            cid, slot["name"], {}, error=f"{slot['name']}: arguments are not valid JSON ({exc.msg} at char {exc.pos})."
        )
    if not isinstance(args, dict):
        return ToolCall(cid, slot["name"], {}, error=f"{slot['name']}: arguments must be a JSON object.")
    return ToolCall(cid, slot["name"], args)


def _causes(exc: BaseException) -> list[BaseException]:
    """`exc` and the exceptions behind it, outermost first (litellm wraps httpx's error twice)."""
    chain: list[BaseException] = []
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen and len(chain) < 20:
        seen.add(id(current))
        chain.append(current)
        current = current.__cause__ or current.__context__
    return chain


_NO_ROUTE = frozenset({101, 113})  # ENETUNREACH, EHOSTUNREACH
_RESOLVE_WORDS = (
    "name or service not known",
    "temporary failure in name resolution",
    "nodename nor servname",
    "no address associated with hostname",
    "getaddrinfo failed",
)


def unreachable_cause(exc: BaseException) -> tuple[str, str | None] | None:
    """("unresolvable" | "refused" | "no-route", "host:port" or None) when `exc` comes from a
    connection that never opened, else None. Decided on the socket error under litellm's wrappers."""
    chain = _causes(exc)
    why: str | None = None
    for e in chain:
        if isinstance(e, socket.gaierror):
            why = "unresolvable"
        elif isinstance(e, ConnectionRefusedError):
            why = "refused"
        elif isinstance(e, OSError) and e.errno in _NO_ROUTE:
            why = "no-route"
        if why:
            break
    if why is None:
        # Some transports keep only the text of the socket error.
        for e in chain:
            if type(e).__name__ != "ConnectError":
                continue
            text = str(e).lower()
            if any(w in text for w in _RESOLVE_WORDS):
                why = "unresolvable"
            elif "connection refused" in text:
                why = "refused"
            if why:
                break
    if why is None:
        return None
    host = None
    for e in reversed(chain):  # the request nearest to the socket error names the real host
        host = _request_host(e)
        if host:
            break
    return why, host


def _request_host(exc: BaseException) -> str | None:
    try:
        request = exc.__dict__.get("_request") or exc.__dict__.get("request")
        url = getattr(request, "url", None)
        host = getattr(url, "host", None)
    except Exception:
        return None
    if not host:
        return None
    port = getattr(url, "port", None)
    return f"{host}:{port}" if port else str(host)


def _host_of(api_base: str | None) -> str | None:
    if not api_base:
        return None
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(api_base)
        return parts.netloc or None
    except ValueError:
        return None


def _mentions_connection(message: str) -> bool:
    m = message.lower()
    return "connection error" in m or "connection refused" in m or "connecterror" in m


def _mentions_context_limit(message: str) -> bool:
    m = message.lower()
    return "context_length_exceeded" in m or "context length" in m or "context window" in m


_REPEATED_NAME = re.compile(r"\b([A-Z][A-Za-z]+(?:Error|Exception)): (?:\1: )+")
_PROVIDER_PREFIX = re.compile(r"\b[A-Z][A-Za-z_]*Exception - ")


def _short(exc: BaseException, limit: int = 300) -> str:
    """litellm's message without its wrappers' repeated names ("InternalServerError:
    InternalServerError: OpenAIException - ...") and its advice to the programmer."""
    text = " ".join(str(exc).split())
    text = text.replace("litellm.", "")
    text = _REPEATED_NAME.sub(r"\1: ", text)
    text = _PROVIDER_PREFIX.sub("", text)
    text = re.sub(r"\s*Handle with `[^`]*`\.?", "", text).strip()
    return text if len(text) <= limit else text[:limit] + "…"
