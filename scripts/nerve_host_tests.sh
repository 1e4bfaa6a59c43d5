#!/usr/bin/env bash
# The integration suite against the real Nerve (NERVE-7…NERVE-12): tests/nerve_host, run by a
# Python 3.13 venv holding Nerve installed from its source and this package installed beside it.
#
#   usage: scripts/nerve_host_tests.sh [PYTEST-ARGS...]
#
# Nerve's source is $NERVE_SOURCE, else ../shared/nerve from the repository root. The venv is
# made by the `nerve-venv` script found beside that source (one folder up), into a temporary
# folder removed at the end. Without a source it prints one line saying so and exits 0.
# Both tiers run (the slow one holds the README blocks under Nerve). The exit status is pytest's.
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
venv=$(mktemp -d)
trap 'rm -rf "$venv"' EXIT
bash "$maker" "$venv/venv"
"$venv/venv/bin/pip" install -q --disable-pip-version-check -e "$repo[web,dev,test]" \
  >"$venv/pip.log" 2>&1 || { tail -n 5 "$venv/pip.log" >&2; exit 1; }
cd "$repo"
NERVE_SOURCE=$source_dir "$venv/venv/bin/python" -m pytest -p no:asyncio -m "slow or not slow" tests/nerve_host "$@"
