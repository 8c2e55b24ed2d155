#!/usr/bin/env bash
# Install what the artifact needs on Debian 12: the Debian packages listed in
# workflow/envs/debian-packages*.txt (only the missing ones) and a Python venv
# (.venv) with the pinned packages of requirements.lock.  Idempotent.
# usage: install-deps.sh [FEATURE...]   features: base (default), slurm, vm, containers, apptainer, apptainer-deps, tools
# (tools: the citation-metadata validator, in a venv of its own; apptainer: the
# site's `apptainer` on PATH, else Apptainer built once per machine from its
# pinned source into /opt/hpcvirt (HPCVIRT_OPT), reused by every later clone)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
features=("$@")
[ ${#features[@]} -eq 0 ] && features=(base)

lists=(workflow/envs/debian-packages.txt)
for f in "${features[@]}"; do
  case $f in
    base|tools) ;;
    slurm|vm|containers|apptainer) lists+=("workflow/envs/debian-packages-$f.txt") ;;
    # the Debian packages Apptainer's build needs, without the build (make test builds it in the background)
    apptainer-deps) lists+=("workflow/envs/debian-packages-apptainer.txt") ;;
    *) echo "install-deps: unknown feature '$f' (allowed: base slurm vm containers apptainer apptainer-deps tools)" >&2
       exit 2 ;;
  esac
done

wanted=$(grep -hvE '^\s*(#|$)' "${lists[@]}" | sort -u)
missing=()
for p in $wanted; do
  dpkg-query -W -f '${db:Status-Abbrev}' "$p" 2>/dev/null | grep -q '^ii' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "install-deps: installing ${#missing[@]} Debian packages: ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# Record the installed versions and compare with those the archive was measured with.
mkdir -p .hpcvirt
dpkg-query -W -f '${Package}\t${Version}\n' $wanted | sort > .hpcvirt/debian-installed.txt
if [ -f workflow/envs/debian-bookworm.versions ]; then
  drift=$(join -t $'\t' workflow/envs/debian-bookworm.versions .hpcvirt/debian-installed.txt | awk -F'\t' '$2 != $3')
  if [ -n "$drift" ]; then
    echo "install-deps: note: these packages differ from the versions the archived campaign used"
    echo "$drift" | awk -F'\t' '{printf "  %s archived %s, installed %s\n", $1, $2, $3}'
  fi
fi

# Python: a venv with the pinned, complete dependency set.  Inside an
# unpacked offline bundle (make bundle), from its wheelhouse only.
if [ -d bundle/wheelhouse ]; then
  export PIP_NO_INDEX=1 PIP_FIND_LINKS="$root/bundle/wheelhouse"
  echo "install-deps: Python packages from bundle/wheelhouse only (no index)"
fi
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  echo "install-deps: creating .venv with $($PY --version)"
  "$PY" -m venv .venv
fi
stamp=.venv/.requirements.sha256
want=$(sha256sum requirements.lock pyproject.toml | sha256sum | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  # uv (pinned by hash in workflow/envs/installer.lock) where it installs, else pip; an offline
  # bundle's wheelhouse is read by pip
  if [ ! -d bundle/wheelhouse ] && .venv/bin/python -m pip install -q --disable-pip-version-check \
      --require-hashes -r workflow/envs/installer.lock 2>/dev/null; then
    echo "install-deps: installing pinned Python packages (requirements.lock) with uv"
    .venv/bin/uv pip install -q --python .venv/bin/python --compile-bytecode -r requirements.lock
    .venv/bin/uv pip install -q --python .venv/bin/python --no-deps -e .
  else
    echo "install-deps: installing pinned Python packages (requirements.lock) with pip"
    .venv/bin/python -m pip install -q --disable-pip-version-check -r requirements.lock
    .venv/bin/python -m pip install -q --disable-pip-version-check --no-deps -e .
  fi
  .venv/bin/python -m ipykernel install --sys-prefix --name python3 >/dev/null
  echo "$want" > "$stamp"
fi
# The citation-metadata validator: its pins conflict with the workflow's, so it has a venv of its own.
if [[ " ${features[*]} " == *" tools "* ]]; then
  tools=.hpcvirt/tools/cffconvert
  want=$(sha256sum workflow/envs/cffconvert.lock | cut -d' ' -f1)
  if [ "$(cat "$tools/.lock.sha256" 2>/dev/null)" != "$want" ]; then
    echo "install-deps: installing the citation validator (workflow/envs/cffconvert.lock) into $tools"
    rm -rf "$tools"
    "$PY" -m venv "$tools"
    "$tools/bin/python" -m pip install -q --disable-pip-version-check -r workflow/envs/cffconvert.lock
    echo "$want" > "$tools/.lock.sha256"
  fi
fi
# Apptainer: the site's, or built from the pinned source (verified sha256; the
# source comes from HPCVIRT_SOURCE_MIRROR or its official URL) once per machine.
if [[ " ${features[*]} " == *" apptainer "* ]]; then
  PYTHONPATH="$root/workflow/lib" .venv/bin/python -m hpcvirt.apptainer install
fi
echo "install-deps: ready (${features[*]})"
