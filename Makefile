# The two commands of the README:
#   make demo   set up .venv and run the main job on the embedded default (Oxigraph + bundled Family)
#   make test   set up .venv (and the Neo4j jars) and run the whole test suite
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

.PHONY: demo test lint bench setup clean neo4j-jars

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

demo: $(STAMP)
	$(BIN)/python scripts/demo.py

# Neo4j 5.26 Community jars for the tests' embedded server (Maven Central -> ~/.m2) and its
# javac-compiled launcher; a no-op when already cached, or when $$NEO4J_URI names a server.
neo4j-jars: $(STAMP)
	$(BIN)/python tests/neo4j_server.py prepare

test: $(STAMP) neo4j-jars
	$(BIN)/ruff check .
	$(BIN)/pytest -m '' -p no:cacheprovider

lint: $(STAMP)
	$(BIN)/ruff check .

clean:
	rm -rf $(VENV) build *.egg-info demo-store demo-out $(SETUP_LOG)
