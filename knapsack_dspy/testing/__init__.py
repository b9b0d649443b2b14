"""Stand-ins and harness pieces shared by the tests and the measurement scripts in ``benchmarks/``.

Nothing in the product imports this package (tests/test_architecture.py: it is the top floor). Its modules:
``openai_stub_server`` (an OpenAI-compatible chat server on 127.0.0.1 with fault injection), ``hostile_answers``
(what a broken or adversarial model could send back), ``malformed_requests`` (bodies ``kdspy serve`` must
refuse), ``busy_loop`` (the throughput measurements' defined load), ``prompt_capture`` (a question's first
prompt rendered without a model) and ``json_result`` (how a measurement script hands over its result).
"""
