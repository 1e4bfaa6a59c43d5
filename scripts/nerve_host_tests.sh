#!/usr/bin/env bash
# The tests against the real Nerve (NERVE-7…NERVE-18), run by a Python 3.13 venv holding Nerve
# installed from its source and this package installed beside it:
#
#   1. the integration suite (tests/nerve_host) against Nerve as it is;
#   2. Nerve's own suite on its source as it is, then on a copy with
#      patches/nerve-adoption.patch applied: a test that passes unpatched must pass patched,
#      and both runs must hold the same tests (NERVE-18);
#   3. the patched Nerve installed in the venv, the integration suite again, the end-to-end
#      test of the patch (tests/nerve_host/test_patched_nerve.py) included.
#
#   usage: scripts/nerve_host_tests.sh [PYTEST-ARGS...]   (the args go to the integration runs)
#
# Nerve's source is $NERVE_SOURCE, else ../shared/nerve from the repository root. The venv is
# made by the `nerve-venv` script found beside that source (one folder up), into a temporary
# folder removed at the end. Without a source it prints one line saying so and exits 0.
# NERVE_SUITE=skip leaves out step 2 (for a quick run by hand; CI runs it).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
source_dir=${NERVE_SOURCE:-$repo/../shared/nerve}
if [ ! -f "$source_dir/pyproject.toml" ] || [ ! -d "$source_dir/nerve" ]; then
  echo "nerve host tests: skipped, no Nerve source at $source_dir (set NERVE_SOURCE to a checkout)"
  exit 0
fi
source_dir=$(cd "$source_dir" && pwd)
maker=$(dirname "$source_dir")/nerve-venv
if [ ! -f "$maker" ]; then
  echo "nerve host tests: no nerve-venv script beside $source_dir (expected $maker)" >&2
  exit 1
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
venv=$work/venv
python=$venv/bin/python
bash "$maker" "$venv"
"$venv/bin/pip" install -q --disable-pip-version-check -e "$repo[web,dev,test]" \
  >"$work/pip.log" 2>&1 || { tail -n 5 "$work/pip.log" >&2; exit 1; }

# A copy of Nerve's source we may write to (the source itself may be read-only), and the same
# copy with the adoption patch applied.
copy_source() {
  mkdir -p "$2"
  (cd "$1" && tar --exclude=__pycache__ --exclude=.git -cf - .) | (cd "$2" && tar -xf -)
  chmod -R u+w "$2"
}
copy_source "$source_dir" "$work/nerve"
copy_source "$source_dir" "$work/nerve-patched"
(cd "$work/nerve-patched" && patch -p1 --forward --quiet < "$repo/patches/nerve-adoption.patch") \
  || { echo "nerve host tests: patches/nerve-adoption.patch does not apply to $source_dir" >&2; exit 1; }

integration() {
  (cd "$repo" && NERVE_SOURCE=$source_dir "$python" -m pytest -p no:asyncio -p no:cacheprovider \
    -m "slow or not slow" tests/nerve_host "$@")
}

echo "== the integration suite against Nerve as it is"
integration "$@"

if [ "${NERVE_SUITE:-run}" != skip ]; then
  # Nerve's suite, run from each tree (its own package is imported from the tree it runs in).
  nerve_suite() {
    (cd "$1" && "$python" -m pytest -q -p no:cacheprovider -o addopts="" \
      --junitxml="$2" tests >"$2.log" 2>&1) || true
    tail -n 1 "$2.log"
  }
  echo "== Nerve's suite, unpatched"
  nerve_suite "$work/nerve" "$work/unpatched.xml"
  echo "== Nerve's suite, patched"
  nerve_suite "$work/nerve-patched" "$work/patched.xml"
  "$python" "$repo/scripts/compare_junit.py" "$work/unpatched.xml" "$work/patched.xml"
fi

echo "== the integration suite against the patched Nerve"
"$venv/bin/pip" install -q --disable-pip-version-check --no-deps --force-reinstall \
  "$work/nerve-patched" >"$work/pip-patched.log" 2>&1 \
  || { tail -n 5 "$work/pip-patched.log" >&2; exit 1; }
integration "$@"
