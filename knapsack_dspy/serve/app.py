"""The HTTP API of a compiled program: ``POST /answer`` and ``GET /health`` (FastAPI).

The program is loaded once, before the server accepts connections. Each request is answered in a worker
thread inside its own ``dspy.context(lm=...)`` (``dspy.configure`` may only be called from the thread that
first called it), at most ``concurrency`` at a time; at most ``max_queue`` requests are admitted at once
(answering or waiting), and one more gets an immediate 429 with ``Retry-After`` (``admission``).

Every answer is JSON: ``{"answer", "scale", "program", "reasoning", "error", "exemplar_ids", "prompt_tokens",
"usage", "latency_s", ...}`` (``error``: the model answered but its program failed; the answer is then null).
Every failure is ``{"error": "<one line>"}``: a body that is too large (413), not JSON or nested too deeply
(400), of the wrong shape (422, naming the field), the queue full (429); the LM failing is 503 (transient:
rate limit, timeout, 5xx, with ``Retry-After``) or 502 (refused: credentials, unknown model, a prompt too
long). Bad input never reaches the program, so it can never be a 500.
"""

from __future__ import annotations

import json
import logging
import math
import time

import anyio
import dspy
from fastapi import FastAPI, Request
from fastapi.responses import Response
from pydantic import ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException

from knapsack_dspy.docqa.data.query_inputs import QueryInputError, check_query_inputs
from knapsack_dspy.file_limits import FileLimitError, parse_json
from knapsack_dspy.llm import counting_calls, lm_error_kind
from knapsack_dspy.llm.errors import describe_lm_error
from knapsack_dspy.messages import one_line
from knapsack_dspy.serve.admission import Admission
from knapsack_dspy.serve.answer_request import MAX_CELLS, AnswerRequest

__all__ = ["DEFAULT_MAX_BODY_BYTES", "create_app"]

logger = logging.getLogger(__name__)

DEFAULT_MAX_BODY_BYTES = 1_000_000  # a TAT-QA document is a few kilobytes
_MAX_INT_BITS = 14_000  # ~4,200 digits: past this json.dumps refuses an int (Python's 4,300-digit limit)


def json_response(payload: dict, status: int = 200, headers: dict | None = None) -> Response:
    """``payload`` as JSON text that any client can read: non-finite numbers and huge integers as strings,
    lone surrogates escaped (``ensure_ascii``)."""
    return Response(json.dumps(_json_safe(payload), ensure_ascii=True), status_code=status, headers=headers,
                    media_type="application/json")


def error_response(status: int, message: str, headers: dict | None = None) -> Response:
    return json_response({"error": one_line(message)}, status, headers)


def _json_safe(value, depth: int = 0):
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return value if value.bit_length() <= _MAX_INT_BITS else f"<integer of {value.bit_length()} bits>"
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, (list, tuple)) and depth < 50:
        return [_json_safe(v, depth + 1) for v in value]
    if isinstance(value, dict) and depth < 50:
        return {str(k): _json_safe(v, depth + 1) for k, v in value.items()}
    try:
        return one_line(str(value), 10_000)
    except Exception:  # noqa: BLE001 - a value whose str() fails still gets an answer
        return f"<{type(value).__name__}>"


_UNION_MEMBERS = {"str", "int", "float", "none"}  # pydantic names the member of a union it tried in the location


def _validation_message(exc: ValidationError) -> str:
    """The first problem pydantic found, as ``field 'table[0][1]': a table cell must be ...``."""
    first = exc.errors()[0]
    loc = [p for i, p in enumerate(first.get("loc", ())) if not (i and p in _UNION_MEMBERS)]
    where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in loc).lstrip(".")
    if loc[:1] == ["table"] and len(loc) == 3:  # every member of the cell union failed: one message for all
        return f"field '{where}': a table cell must be a string, a number or null"
    more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
    return f"field '{where}': {first.get('msg', 'invalid')}{more}" if where else f"{first.get('msg')}{more}"


async def _read_body(request: Request, limit: int) -> bytes | None:
    """The body, or None once it is longer than ``limit`` bytes (the rest is not read)."""
    stated = request.headers.get("content-length", "")
    if stated.isdigit() and int(stated) > limit:
        return None
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


def _answer(program, lm, inputs: dict) -> dict:
    """Ask the program (in a worker thread); the response fields."""
    started = time.perf_counter()
    with counting_calls() as calls, dspy.context(lm=lm, track_usage=True):
        prediction = program(**inputs)
    selection = getattr(prediction, "selection", None) or {}
    return {
        "answer": getattr(prediction, "answer", None),
        "scale": getattr(prediction, "scale", None),
        "program": getattr(prediction, "program", None),
        "reasoning": getattr(prediction, "reasoning", None),
        "error": getattr(prediction, "error", None),
        "exemplar_ids": list(getattr(prediction, "exemplar_ids", None) or selection.get("ids", [])),
        "prompt_tokens": selection.get("prompt_tokens"),
        "within_budget": selection.get("within_budget"),
        "token_count": selection.get("token_count"),
        "route": getattr(prediction, "route", None),
        "usage": {"lm_calls": calls.calls, "cache_hits": calls.cache_hits, "prompt_tokens": calls.prompt_tokens,
                  "completion_tokens": calls.completion_tokens},
        "latency_s": round(time.perf_counter() - started, 3),
    }


def create_app(program, lm, *, name: str = "program", max_queue: int = 8, concurrency: int = 1,
               max_body_bytes: int = DEFAULT_MAX_BODY_BYTES) -> FastAPI:
    """The API answering with ``program`` and ``lm`` (both loaded already)."""
    app = FastAPI(title="knapsack-dspy", description=f"compiled program {name}", docs_url=None, redoc_url=None)
    admission = Admission(max_queue, concurrency)
    limiter = anyio.CapacityLimiter(concurrency)
    started = time.time()
    app.state.admission = admission

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> Response:
        return error_response(exc.status_code, str(exc.detail), getattr(exc, "headers", None))

    @app.exception_handler(Exception)
    async def internal_error(request: Request, exc: Exception) -> Response:
        logger.exception("internal error answering %s", request.url.path)
        return error_response(500, f"internal error: {type(exc).__name__}: {exc}")

    @app.get("/health")
    async def health() -> Response:
        return json_response({"status": "ok", "program": name, "model": getattr(lm, "model", None),
                              "queue": admission.snapshot(), "uptime_s": round(time.time() - started, 1)})

    @app.post("/answer")
    async def answer(request: Request) -> Response:
        body = await _read_body(request, max_body_bytes)
        if body is None:
            return error_response(413, f"the request body is larger than {max_body_bytes} bytes")
        try:
            data = parse_json(body)
        except (ValueError, RecursionError) as exc:  # JSONDecodeError, UnicodeDecodeError, FileLimitError
            what = "nested too deeply" if isinstance(exc, (FileLimitError, RecursionError)) else "not valid JSON"
            return error_response(400, f"the request body is {what}: {exc}")
        if not isinstance(data, dict):
            return error_response(422, 'the request body must be a JSON object: {"question": ..., "table": [...], '
                                       '"paragraphs": [...]}')
        try:
            query = AnswerRequest.model_validate(data)
            if query.cell_count() > MAX_CELLS:
                raise QueryInputError(f"the table has more than {MAX_CELLS} cells")
            inputs = check_query_inputs(query.question, query.table, query.paragraphs)
        except ValidationError as exc:
            return error_response(422, _validation_message(exc))
        except QueryInputError as exc:
            return error_response(422, str(exc))
        if not admission.enter():
            return error_response(429, f"the queue is full ({max_queue} requests); try again later",
                                  {"Retry-After": str(admission.retry_after_s())})
        latency = None
        try:
            result = await anyio.to_thread.run_sync(_answer, program, lm, inputs, limiter=limiter)
            latency = result["latency_s"]
        except Exception as exc:  # LM failures are the LM's, said in one line; anything else is re-raised
            kind = lm_error_kind(exc)
            if kind is None:
                raise
            status, headers = (503, {"Retry-After": str(admission.retry_after_s())}) if kind == "transient" else (
                502, None)
            return error_response(status, describe_lm_error(exc), headers)
        finally:
            admission.leave(latency)
        return json_response(result)

    return app
