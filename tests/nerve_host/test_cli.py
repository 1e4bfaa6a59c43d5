"""Nerve's own click command with the package mounted by ``extend_cli`` (NERVE-1, NERVE-7,
NERVE-10), run as a real process on a fresh machine."""

from __future__ import annotations

from importlib import metadata

import pytest

from tests.nerve_host.machine import NO_NERVE, Machine, RunHost

pytest.importorskip("nerve.cli", reason=NO_NERVE)

from provisioner.base.command import PACKAGE_GROUPS


class TestMounted:
    def test_nerves_help_lists_its_own_commands_and_the_packages_groups(
        self, run_host: RunHost
    ) -> None:
        done = run_host("--help")
        assert done.returncode == 0, done.stderr
        listed = {line.split()[0] for line in done.stdout.splitlines() if line.startswith("  ")}
        assert {"init", "start", "doctor", "config", *PACKAGE_GROUPS} <= listed

    def test_nerves_init_takes_the_memory_backend_option(self, run_host: RunHost) -> None:
        done = run_host("init", "--help")
        assert done.returncode == 0, done.stderr
        assert "--memory-backend [memu|loom]" in done.stdout

    def test_a_mounted_group_runs_the_packages_command_line(
        self, run_host: RunHost, machine: Machine
    ) -> None:
        out = machine.home / "preview"
        done = run_host("render", "--backend", "loom", "--out", str(out))
        assert done.returncode == 0, done.stderr
        assert (out / "AGENTS.md").is_file()

    def test_bad_input_to_a_mounted_group_is_one_line_naming_nerve(
        self, run_host: RunHost, machine: Machine
    ) -> None:
        done = run_host("render", "--profile", "nobody", "--out", str(machine.home / "out"))
        assert done.returncode == 2
        assert done.stderr.startswith("nerve: error: render: argument --profile: invalid choice")
        assert len(done.stderr.splitlines()) == 1


class TestOneOwnerPerScript:
    """NERVE-1: the package installs no ``nerve``; only Nerve's distribution declares it."""

    def test_only_nerves_distribution_declares_the_nerve_script(self) -> None:
        declared = metadata.entry_points(group="console_scripts", name="nerve")
        assert {entry.dist.name for entry in declared if entry.dist} == {"nerve"}
        assert {entry.value for entry in declared} == {"nerve.cli:main"}

    def test_the_package_declares_nerve_provisioner_only(self) -> None:
        package = metadata.distribution("nerve-provisioner")
        scripts = package.entry_points.select(group="console_scripts")
        assert [entry.name for entry in scripts] == ["nerve-provisioner"]
