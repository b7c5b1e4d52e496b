"""Where rageval writes (rageval.files.write_bytes): atomically over a regular file or a new path; in
place to a device or a pipe (also through a link, as /dev/stdout is one), which is never replaced
by a regular file; never through a link to a file. Every special target here lives in the test's
own folder (a FIFO, links to /dev/null, /dev/full, /proc/self/fd/1): even the code before the fix,
which renamed a temp file over the target, only ever replaced those links, never a real device.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import threading

import pytest
import seed_data

from rageval.errors import RagevalError
from rageval.files import write_bytes, write_text


def kind(path) -> str:
    mode = os.lstat(path).st_mode
    return {stat.S_ISLNK(mode): "link", stat.S_ISREG(mode): "file", stat.S_ISFIFO(mode): "fifo",
            stat.S_ISCHR(mode): "char"}[True]


def leftovers(folder) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


def test_a_new_path_and_a_regular_file_are_written_atomically(tmp_path):
    target = tmp_path / "sub" / "out.json"
    write_text(target, "first\n")
    inode = target.stat().st_ino
    write_text(target, "second\n")
    assert target.read_text(encoding="utf-8") == "second\n" and target.stat().st_ino != inode   # renamed over
    assert kind(target) == "file" and leftovers(target.parent) == []


def test_a_fifo_is_written_in_place_and_stays_a_fifo(tmp_path):
    fifo = tmp_path / "out.json"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()), daemon=True)
    reader.start()
    write_text(fifo, '{"ok": true}\n')
    reader.join(10)
    assert got == [b'{"ok": true}\n'] and kind(fifo) == "fifo" and leftovers(tmp_path) == []


def test_a_link_to_a_device_is_written_through_and_neither_is_replaced(tmp_path):
    link = tmp_path / "report.md"
    link.symlink_to("/dev/null")
    write_text(link, "# report\n")
    assert kind(link) == "link" and os.readlink(link) == "/dev/null" and kind("/dev/null") == "char"
    assert leftovers(tmp_path) == []


def test_a_full_device_is_an_error_naming_the_path_and_is_not_replaced(tmp_path):
    link = tmp_path / "out.json"
    link.symlink_to("/dev/full")
    with pytest.raises(RagevalError, match=rf"{link}: could not write.*No space left on device"):
        write_text(link, "x" * 10)
    assert kind(link) == "link" and kind("/dev/full") == "char" and leftovers(tmp_path) == []


@pytest.mark.parametrize("target", ["runs/7.json", "missing.json", "runs"])
def test_a_link_to_a_file_a_folder_or_nowhere_is_refused_and_left_alone(tmp_path, target):
    """Written through, a link in a checkout a pull request controls could point anywhere; replaced,
    it would silently stop being a link. Refused, both stay as they were."""
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "7.json").write_text("old\n", encoding="utf-8")
    link = tmp_path / "latest.json"
    link.symlink_to(target)
    with pytest.raises(RagevalError, match=rf"latest\.json: a symbolic link \(to {target}\).*Give the path of the file"):
        write_text(link, "new\n")
    assert kind(link) == "link" and os.readlink(link) == target
    assert (tmp_path / "runs" / "7.json").read_text(encoding="utf-8") == "old\n" and leftovers(tmp_path) == []


def test_replace_is_for_rageval_own_files_and_never_writes_through(tmp_path):
    """A cache entry: whatever sits at the path (a planted link) is replaced; its target is untouched."""
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n", encoding="utf-8")
    entry = tmp_path / "ab" / "key.json"
    entry.parent.mkdir()
    entry.symlink_to(victim)
    write_bytes(entry, b"{}", replace=True)
    assert kind(entry) == "file" and entry.read_bytes() == b"{}" and victim.read_text(encoding="utf-8") == "keep me\n"


def test_a_folder_is_an_error(tmp_path):
    (tmp_path / "out.json").mkdir()
    with pytest.raises(RagevalError, match="out.json: could not write the file"):
        write_text(tmp_path / "out.json", "x")


def test_standard_output_redirected_to_a_file_is_appended_to_not_replaced(tmp_path):
    """`--out /dev/stdout >> log`: the link names a file the process has open; it is written there."""
    log = tmp_path / "log.txt"
    log.write_text("earlier line\n", encoding="utf-8")
    link = tmp_path / "stdout"
    link.symlink_to("/proc/self/fd/1")
    script = f"from rageval.files import write_text; write_text({str(link)!r}, 'results\\n')"
    with open(log, "a", encoding="utf-8") as fh:
        subprocess.run([sys.executable, "-c", script], stdout=fh, check=True, timeout=60)
    assert log.read_text(encoding="utf-8") == "earlier line\nresults\n" and kind(log) == "file"


def test_run_out_to_the_standard_output_through_a_link(tmp_path):
    """`--out` naming the process's standard output (a pipe here): the RunResult arrives there."""
    project = seed_data.write_project(tmp_path / "p")
    link = tmp_path / "stdout.json"
    link.symlink_to("/proc/self/fd/1")
    out = subprocess.run([sys.executable, "-m", "rageval", "run", "--config", str(project["chunk-200"]),
                          "--out", str(link)], capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == 0, out.stderr[-2000:]
    first = out.stdout.splitlines()[0]
    assert json.loads(first)["schema_version"] == 2 and kind(link) == "link"
