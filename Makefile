# Two commands do all set-up on a fresh machine (see README.md):
#   make report   execute every notebook headless and write HTML reports under reports/
#   make test     run the test suite
# Both create the virtual environment in .venv first if it is missing.

PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
# A plain `torch` requirement would pull a multi-GB CUDA build on a machine without
# one; pin the release we test against. Override on a GPU box, e.g. TORCH_SPEC=torch.
TORCH_SPEC  ?= torch==2.13.0
TRITON_SPEC ?= triton==3.6.0

.PHONY: env report test test-gpu lab clean

env: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q "$(TORCH_SPEC)" "$(TRITON_SPEC)"
	$(PY) -m pip install -q -e ".[test,triton]"
	$(PY) -m ipykernel install --sys-prefix --name python3 >/dev/null
	touch $@

report: env
	$(PY) -m fusedkit report --out reports

test: env
	$(PY) -m pytest

# JupyterLab refuses to start as root (containers, CI) unless told --allow-root.
lab: env
	$(VENV)/bin/jupyter lab $(if $(filter 0,$(shell id -u)),--allow-root) notebooks/

clean:
	rm -rf reports build .pytest_cache .browser-shots
