"""Host-side stand-ins for the container test (.ci/container-test.sh), each run as its own process
on 127.0.0.1 until SIGTERM or --max-seconds:

    python3 .ci/fakes.py github --port-file F --state-file S --token T --artifact NAME=BRANCH=ZIP
    python3 .ci/fakes.py openai --port-file F
    python3 .ci/fakes.py rag --port-file F --host 0.0.0.0 --port 8000 --results BASELINE.json

``github`` is tests/github_server.py's fake GitHub (the REST subset) holding the given artifacts;
on exit it writes its comments, commit statuses and request log to the state file. ``openai`` is
tests/openai_server.py with its default answers (an echo of the question). ``rag`` is
a team's RAG service as a job's service container runs it: ``POST /answer`` with
``{"id", "question"}`` answers the trace the given RunResult holds for that case (read with
rageval's own loader, which unpacks the chunk table, so it runs inside the action's own image).
Only the standard library, rageval and the two test servers.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent / "tests"


def _write_port(path: str, port: int) -> None:
    tmp = f"{path}.tmp"
    Path(tmp).write_text(str(port), encoding="utf-8")
    os.replace(tmp, path)


def _rag_server(results: Path, host: str, port: int) -> ThreadingHTTPServer:
    from rageval.results import load_result
    cases = {c.id: {"id": c.id, "answer": c.answer, "retrieved": [r.to_dict() for r in c.retrieved]}
             for c in load_result(results).cases}

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            pass

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
            case = cases.get(body.get("id"))
            trace = case if case and self.path == "/answer" else None
            data = json.dumps(trace).encode() if trace else b'{"error": "unknown case"}'
            self.send_response(200 if trace else 404)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return ThreadingHTTPServer((host, port), Handler)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("kind", choices=("github", "openai", "rag"))
    parser.add_argument("--port-file", required=True)
    parser.add_argument("--state-file")
    parser.add_argument("--token")
    parser.add_argument("--artifact", action="append", default=[], help="NAME=BRANCH=ZIP")
    parser.add_argument("--results", help="rag: the RunResult whose traces the service answers")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--max-seconds", type=float, default=900)
    args = parser.parse_args()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    if args.kind == "rag":
        httpd = _rag_server(Path(args.results), args.host, args.port)
        threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True).start()
        _write_port(args.port_file, httpd.server_address[1])
        stop.wait(args.max_seconds)
        httpd.shutdown()
        return 0
    sys.path.insert(0, str(TESTS))
    if args.kind == "openai":
        from openai_server import OpenAIServer  # noqa: PLC0415 - tests/ is on the path only now
        with OpenAIServer() as server:   # answers "echo: <question>": enough to fill the cache
            _write_port(args.port_file, server.port)
            stop.wait(args.max_seconds)
        return 0
    from github_server import FakeGitHub  # noqa: PLC0415
    with FakeGitHub(token=args.token) as gh:
        for spec in args.artifact:
            name, branch, path = spec.split("=", 2)
            gh.add_artifact(name, zip_bytes=Path(path).read_bytes(), branch=branch)
        _write_port(args.port_file, int(gh.origin.rsplit(":", 1)[1]))
        stop.wait(args.max_seconds)
        state = {"comments": gh.comments, "statuses": gh.statuses,
                 "requests": [{"method": r.method, "path": r.path, "operation": r.operation, "status": r.status}
                              for r in gh.requests]}
    if args.state_file:
        Path(args.state_file).write_text(json.dumps(state, ensure_ascii=False, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
