"""``kdspy serve``: a compiled program behind an HTTP API (FastAPI + uvicorn, the ``serve`` extra).

- ``app.create_app``: the ASGI application (``POST /answer``, ``GET /health``)
- ``admission.Admission``: the bounded queue (beyond it: 429 with ``Retry-After``)
- ``answer_request``: the request body's schema (pydantic)
"""
