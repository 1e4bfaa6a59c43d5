"""Init never writes through a link, and refuses odd entries with one line (INIT-7, defects 2, 10).

The agent owns its workspace and may be hostile: it can swap ``config/`` for a link to a folder
outside, plant a link where init writes a file, or leave a FIFO or folder where a file belongs.
Each such path is refused before anything is written; links elsewhere are left alone.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from provisioner.workspace.fs import MAX_READ_BYTES, WorkspaceRefused, WorkspaceRoot
from tests.support.processes import assert_one_line_error


def snapshot(root: Path) -> dict[str, bytes]:
    return {
        path.relative_to(root).as_posix(): path.read_bytes()
        for path in sorted(root.rglob("*"))
        if path.is_file() and not path.is_symlink()
    }


@pytest.fixture
def workspace(run_nerve, tmp_path: Path) -> Path:
    """A memU workspace provisioned once, with a folder outside it to point links at."""
    result = run_nerve("init", "--workspace", "ws")
    assert result.returncode == 0, result.stderr
    (tmp_path / "outside").mkdir()
    return tmp_path / "ws"


class TestLinksOutOfTheWorkspace:
    def test_a_config_folder_linked_outside_is_refused_and_the_outside_untouched(
        self, run_nerve, workspace, tmp_path
    ):
        """INIT-7: config/ -> ../outside: init refuses, and the file outside keeps its bytes."""
        outside = tmp_path / "outside"
        (workspace / "config").rename(outside / "config")
        (workspace / "config").symlink_to(outside / "config")
        before = snapshot(outside)
        result = run_nerve("init", "--workspace", "ws", "--memory-backend", "loom")
        assert_one_line_error(result, "ws/config", "symbolic link")
        assert snapshot(outside) == before

    def test_a_file_replaced_by_a_link_is_refused_and_its_target_untouched(
        self, run_nerve, workspace, tmp_path
    ):
        """INIT-7: AGENTS.md -> a file outside: the target is never rewritten."""
        target = tmp_path / "outside" / "precious.md"
        target.write_text("not init's\n")
        (workspace / "AGENTS.md").unlink()
        (workspace / "AGENTS.md").symlink_to(target)
        result = run_nerve("init", "--workspace", "ws", "--memory-backend", "loom")
        assert_one_line_error(result, "AGENTS.md", "symbolic link")
        assert target.read_text() == "not init's\n"

    def test_a_link_two_levels_down_is_refused(self, run_nerve, workspace, tmp_path):
        """INIT-7: a link at any depth: skills/nerve-dev -> outside."""
        skill = workspace / "skills" / "nerve-dev"
        skill.rename(tmp_path / "outside" / "nerve-dev")
        skill.symlink_to(tmp_path / "outside" / "nerve-dev")
        before = snapshot(tmp_path / "outside")
        result = run_nerve("init", "--workspace", "ws", "--memory-backend", "loom")
        assert_one_line_error(result, "skills/nerve-dev", "symbolic link")
        assert snapshot(tmp_path / "outside") == before

    def test_nothing_in_the_workspace_is_written_when_a_link_is_refused(
        self, run_nerve, workspace, tmp_path
    ):
        """INIT-7: the check comes before the first write, so no file is half re-worded."""
        (workspace / "TOOLS.md").unlink()
        (workspace / "TOOLS.md").symlink_to(tmp_path / "outside" / "nothing.md")
        before = snapshot(workspace)
        result = run_nerve("init", "--workspace", "ws", "--memory-backend", "loom")
        assert result.returncode == 2
        assert snapshot(workspace) == before

    def test_a_link_init_does_not_use_is_left_alone(self, run_nerve, workspace, tmp_path):
        """INIT-7: the agent's own link to somewhere else is not init's business."""
        (workspace / "notes").symlink_to(tmp_path / "outside")
        result = run_nerve("init", "--workspace", "ws", "--memory-backend", "loom")
        assert result.returncode == 0, result.stderr
        assert (workspace / "notes").is_symlink()


class TestEntriesOfTheWrongKind:
    def test_a_fifo_where_a_file_belongs_is_refused_without_hanging(self, run_nerve, workspace):
        """Defect 2: reading a FIFO would block; it is refused as not a file."""
        (workspace / "SOUL.md").unlink()
        os.mkfifo(workspace / "SOUL.md")
        result = run_nerve("init", "--workspace", "ws")
        assert_one_line_error(result, "SOUL.md", "FIFO")

    def test_a_folder_where_a_file_belongs_is_refused(self, run_nerve, workspace):
        (workspace / "SOUL.md").unlink()
        (workspace / "SOUL.md").mkdir()
        result = run_nerve("init", "--workspace", "ws")
        assert_one_line_error(result, "SOUL.md", "a folder")

    def test_a_plain_file_named_dot_nerve_is_refused(self, run_nerve, tmp_path):
        """Defect 10: `.nerve` as a file, in a workspace never provisioned."""
        (tmp_path / "ws").mkdir()
        (tmp_path / "ws" / ".nerve").write_text("")
        result = run_nerve("init", "--workspace", "ws")
        assert_one_line_error(result, "ws/.nerve", "expected a folder")

    def test_a_dangling_link_as_workspace_is_refused(self, run_nerve, tmp_path):
        (tmp_path / "ws").symlink_to(tmp_path / "nowhere")
        result = run_nerve("init", "--workspace", "ws")
        assert_one_line_error(result, "ws", "link to nothing")
        assert not (tmp_path / "nowhere").exists()

    def test_a_dangling_link_as_render_out_is_refused(self, run_nerve, tmp_path):
        (tmp_path / "out").symlink_to(tmp_path / "nowhere")
        result = run_nerve("render", "--out", "out")
        assert_one_line_error(result, "out", "link to nothing")
        assert not (tmp_path / "nowhere").exists()

    def test_a_workspace_under_proc_is_one_line(self, run_nerve):
        """Defect 10: a path that cannot be created."""
        result = run_nerve("init", "--workspace", "/proc/self/nerve-workspace")
        assert_one_line_error(result, "/proc/self/nerve-workspace")

    def test_an_unwritable_workspace_is_one_line(self, run_nerve, tmp_path):
        """Defect 10: a workspace inside a read-only place (sysfs) cannot be written; REL-4:
        that is "cannot create", 73."""
        result = run_nerve("init", "--workspace", "/sys/nerve-workspace")
        assert_one_line_error(result, "/sys/nerve-workspace", "permission denied", status=73)

    def test_a_render_out_that_cannot_be_created_is_one_line(self, run_nerve):
        """Like init's workspace: a preview folder under /proc cannot be made."""
        result = run_nerve("render", "--out", "/proc/self/nerve-preview")
        assert_one_line_error(result, "/proc/self/nerve-preview", "cannot be written")

    def test_a_render_out_in_a_read_only_place_is_one_line(self, run_nerve):
        """REL-4: a folder that cannot be created there is 73."""
        result = run_nerve("render", "--out", "/sys/nerve-preview")
        assert_one_line_error(result, "/sys/nerve-preview", "permission denied", status=73)


class TestWorkspaceRoot:
    def test_a_link_swapped_in_after_the_check_is_still_not_followed(self, tmp_path):
        """INIT-7: writes open each component without following links, so a race cannot win."""
        (tmp_path / "ws" / "config").mkdir(parents=True)
        (tmp_path / "outside").mkdir()
        with WorkspaceRoot(tmp_path / "ws") as root:
            root.check_writable("config/settings.yaml")
            (tmp_path / "ws" / "config").rmdir()
            (tmp_path / "ws" / "config").symlink_to(tmp_path / "outside")
            with pytest.raises(WorkspaceRefused, match="symbolic link"):
                root.write("config/settings.yaml", b"x", 0o644)
        assert list((tmp_path / "outside").iterdir()) == []

    def test_a_stale_temporary_link_is_replaced_not_followed(self, tmp_path):
        """A leftover `.<name>.nerve-tmp` that is a link is removed, its target untouched."""
        (tmp_path / "ws").mkdir()
        target = tmp_path / "target"
        target.write_text("keep")
        (tmp_path / "ws" / ".SOUL.md.nerve-tmp").symlink_to(target)
        with WorkspaceRoot(tmp_path / "ws") as root:
            root.write("SOUL.md", b"soul\n", 0o644)
        assert target.read_text() == "keep"
        assert (tmp_path / "ws" / "SOUL.md").read_bytes() == b"soul\n"
        assert not (tmp_path / "ws" / ".SOUL.md.nerve-tmp").exists()

    def test_a_huge_planted_file_is_read_only_so_far_and_kept(self, tmp_path):
        """INIT-7: a planted huge file costs a bounded read, and is not init's."""
        (tmp_path / "ws").mkdir()
        (tmp_path / "ws" / "AGENTS.md").write_bytes(b"x" * (MAX_READ_BYTES + 4096))
        with WorkspaceRoot(tmp_path / "ws") as root:
            found = root.read("AGENTS.md")
        assert found is not None and len(found[0]) == MAX_READ_BYTES + 1
