# lookalike — two commands on a fresh machine:
#   make report            full report on the built-in demo corpus  -> outputs/demo/index.html
#   make test              unit tests + every CI notebook re-executed with nbval + the corpus-shape lane
#   make test-fast         unit tests only (no notebook execution, browser or GPU)
# Variants: make report RUN=ci | make report PARAMS=path/to/run.yaml
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
RUN ?= demo
PARAMS ?= params/$(RUN).yaml
# Debian packages the default configuration needs: tesseract for the default OCR engine.
APT_PACKAGES ?= tesseract-ocr tesseract-ocr-eng chromium chromium-driver
STAMP := $(VENV)/.setup-done

.PHONY: setup report test test-fast test-shapes docs clean-outputs

setup: $(STAMP)

$(STAMP): requirements.txt constraints-torch.txt pyproject.toml
	@$(PYTHON) -c 'import sys; assert sys.version_info[:2] == (3, 11), "lookalike needs Python 3.11, found " + sys.version' 
	@if [ -n "$(APT_PACKAGES)" ]; then \
	  missing=$$(for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	  if [ -n "$$missing" ]; then \
	    if command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
	      apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	    else \
	      echo "make setup: missing Debian packages: $$missing"; \
	      echo "  install them (sudo apt-get install $$missing), or skip them: make setup APT_PACKAGES="; \
	      echo "  (without tesseract set encode.ocr_engine: rapidocr; without chromium the browser tests skip)"; \
	      exit 1; \
	    fi; \
	  fi; \
	fi
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r constraints-torch.txt
	$(PY) -m pip install -q -c constraints-torch.txt -r requirements.txt
	@# colpali-engine last, without its dependencies (requirements.txt pins them): it caps torch below the
	@# version these machines run (constraints-torch.txt says why), and pip would print that known cap as a
	@# red ERROR on every set-up; --no-warn-conflicts keeps it to this one package.
	$(PY) -m pip install -q --no-deps --no-warn-conflicts colpali-engine==0.3.18
	$(PY) -m pip install -q --no-deps -e .
	touch $(STAMP)

report: setup
	$(PY) -m lookalike check $(PARAMS)
	$(PY) -m lookalike run $(PARAMS)

# nbval re-executes copies of the stored CI notebooks in build/nbval/ (ignored by git), so the
# tests leave the working tree as they found it.
NBVAL_DIR := build/nbval/ci/notebooks

# The stored CI notebooks re-executed with nbval, in one process and in order (each reads what the one
# before wrote), beside every other test (the browser tests and the corpus-shape lane included) on two
# pytest workers, handed out one at a time with the slow ones first (tests/conftest.py orders them), so
# both workers stay busy to the end. nbval keeps about one core busy for a minute, on one thread as each
# worker does; its report is printed after the workers'. (xdist's --dist loadgroup, which could have kept
# the notebooks on one worker, groups nothing under pytest 9: measured, each cell went to either worker.)
test: setup
	rm -rf build/nbval && mkdir -p $(NBVAL_DIR) && cp outputs/ci/notebooks/*.ipynb $(NBVAL_DIR)/
	OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1 $(PY) -m pytest -p no:cacheprovider --nbval-lax \
	  --nbval-sanitize-with tests/nbval_sanitize.cfg $(NBVAL_DIR) > build/nbval.log 2>&1 & nbval=$$!; \
	$(PY) -m pytest -n 2 --maxschedchunk 1 --durations=25 tests; tests=$$?; \
	wait $$nbval; notebooks=$$?; echo "--- nbval: the stored CI notebooks re-executed ---"; cat build/nbval.log; \
	rm -rf build/nbval build/nbval.log; test $$tests -eq 0 -a $$notebooks -eq 0

# the corpus-shape lane: every stage on every generated corpus shape, then lookalike audit's invariants
# (and, on the demo generator's other seeds, every planted effect); two shapes at a time
test-shapes: setup
	$(PY) -m pytest -n 2 --maxschedchunk 1 --durations=10 tests/shapes

# unit tests only: no notebook execution, no browser, no GPU; two workers (about 4.5 minutes on 2 cores)
test-fast: setup
	$(PY) -m pytest -n 2 --maxschedchunk 1 -m "not slow and not browser and not gpu" tests

# lib/lookalike/base.yaml and docs/parameters.md are written from the schema's declared types
# (lib/lookalike/config.py); a test checks both are current
docs: setup
	$(PY) -c "from lookalike import params; open('lib/lookalike/base.yaml', 'w', encoding='utf-8').write(params.base_yaml()); open('docs/parameters.md', 'w', encoding='utf-8').write(params.reference_markdown())"

clean-outputs:
	rm -rf outputs/demo outputs/ci/{corpus,tables,figures,headlines,html,index.html,manifest.json}
