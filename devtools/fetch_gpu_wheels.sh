#!/usr/bin/env bash
# Download, here, the wheels a lent GPU machine lacks (the Jupyter stack, for executing the
# notebooks there, and websocket-client, which tests/test_browser.py imports: without it pytest
# stops while collecting the suite there), into .whl/ (ignored by git; carry it with the call). That machine runs
# Python 3.12 with torch, numpy, pandas, jinja2 ... already installed: those are removed
# again so that its own versions stay in charge. devtools/gpu_session.sh installs the rest.
set -euo pipefail
cd "$(dirname "$0")/.."
grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo '/.whl/' >> .git/info/exclude
mkdir -p .whl
python3 -m pip download -q --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
  --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform manylinux1_x86_64 \
  -d .whl nbclient nbconvert nbformat ipykernel ipywidgets websocket-client cloudpickle
# Already on the GPU image; a second copy would shadow it.
rm -f .whl/{typing_extensions,packaging,jinja2,markupsafe,psutil,pygments,attrs,python_dateutil,tzdata}-*
ls .whl | wc -l
