# Two commands do all set-up on a fresh machine (see README.md):
#   make report   execute every notebook headless and write HTML reports under reports/
#   make test     run the test suite
# Both create the virtual environment in .venv first if it is missing.

HERE   := $(dir $(abspath $(lastword $(MAKEFILE_LIST))))
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
# A plain `torch` requirement would pull a multi-GB CUDA build on a machine without
# one; pin the release we test against. Override on a GPU box, e.g. TORCH_SPEC=torch.
TORCH_SPEC  ?= torch==2.13.0
TRITON_SPEC ?= triton==3.6.0

.PHONY: env git-filter report test test-gpu lab clean

# The environment, its `fusedkit` command (.venv/bin/fusedkit), the notebook filter, and
# JupyterLab's default settings (overrides.json; the rule reruns when this Makefile changes):
# no widget state saved into a notebook (a notebook holding it, or opened while its kernel's
# widgets live, would open marked unsaved, untouched; the workbook's widgets keep a picture of
# themselves instead, fusedkit/widget_pictures.py), and no "news?" toast over the notebook.
LAB_OVERRIDES = $(VENV)/share/jupyter/lab/settings/overrides.json
LAB_SETTINGS = {"@jupyter-widgets/jupyterlab-manager:plugin": {"saveState": false}, \
                "@jupyterlab/apputils-extension:notification": {"fetchNews": "false"}}
env: $(VENV)/.installed git-filter $(LAB_OVERRIDES)

$(LAB_OVERRIDES): $(VENV)/.installed Makefile
	mkdir -p $(dir $@)
	echo '$(LAB_SETTINGS)' > $@

$(VENV)/.installed: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q "$(TORCH_SPEC)" "$(TRITON_SPEC)"
	$(PY) -m pip install -q -e ".[test,triton]"
	$(PY) -m ipykernel install --sys-prefix --name python3 >/dev/null
	touch $@

# Jupyter saves outputs, execution counts and widget state into the notebooks; git stores them
# without (nbstripout as the clean filter of .gitattributes, cell ids kept), so working in
# JupyterLab leaves `git status` clean. The working files keep their outputs. Outside a git
# checkout of its own (an unpacked archive) there is nothing to set up.
# language_info is what the kernel says of itself (its Python's version, lexer names): written
# by JupyterLab on every save, it differs from machine to machine, so it is stripped too.
# JupyterLab adds it to a notebook that lacks it as soon as the kernel starts, so an untouched
# notebook would open marked unsaved: the smudge side writes this machine's language_info into
# the files git checks out, and the notebooks already checked out get it here.
NBSTRIPOUT_ARGS = --keep-id --extra-keys metadata.language_info
NBSTRIPOUT = "$(abspath $(PY))" -m nbstripout $(NBSTRIPOUT_ARGS)
NB_SMUDGE = "$(abspath $(PY))" -I "$(HERE)fusedkit/notebook_git.py"
git-filter:
	@if [ "$$(git rev-parse --show-toplevel 2>/dev/null)" = "$$(pwd -P)" ]; then \
	    git config filter.nbstripout.clean '$(NBSTRIPOUT)' && \
	    git config filter.nbstripout.smudge '$(NB_SMUDGE) smudge' && \
	    git config diff.ipynb.textconv '$(NBSTRIPOUT) -t' && \
	    git ls-files -z -- '*.ipynb' | xargs -0 -r $(NB_SMUDGE) fill; \
	fi

report: env
	$(PY) -m fusedkit report --out reports

test: env
	$(PY) -m pytest

# JupyterLab serves the repository, so its file browser reaches the kernel sources and data/
# the notebooks point to, and opens in notebooks/. It refuses to start as root (containers, CI)
# unless told --allow-root. After each save, a notebook changed only in what the filter strips
# is refreshed in git's index, so that `git status` stays clean too (fusedkit/notebook_git.py).
LAB_ARGS = --ServerApp.root_dir=. --ContentsManager.preferred_dir=notebooks \
           --ContentsManager.post_save_hook=fusedkit.notebook_git.refresh_index
lab: env
	$(VENV)/bin/jupyter lab $(if $(filter 0,$(shell id -u)),--allow-root) $(LAB_ARGS)

clean:
	rm -rf reports build .pytest_cache .browser-shots
