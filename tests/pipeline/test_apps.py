"""The command and http apps against real processes / a real HTTP server on 127.0.0.1."""

import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from conftest import ROOT

APP = """\
import json, sys
for line in sys.stdin:
    req = json.loads(line)
    if req["id"] == "q03":
        print("not json", flush=True)
        continue
    print(json.dumps({"id": req["id"], "answer": "Trong 7 ngày kể từ ngày nhận hàng.",
                      "retrieved": [{"chunk_id": "c1", "sections": ["DT-1"], "text": "DT-1"}]}), flush=True)
"""


def project(seed_project, app_yaml):
    cfg = seed_project["chunk-200"]
    cfg.write_text(cfg.read_text(encoding="utf-8").replace("app: {type: replay, path: chunk-200.jsonl}", app_yaml),
                   encoding="utf-8")
    return cfg


def test_command_app(seed_project, run_cli, tmp_path):
    script = tmp_path / "my_app.py"
    script.write_text(APP, encoding="utf-8")
    cfg = project(seed_project, f"app: {{type: command, command: [{sys.executable}, {script}], timeout_s: 10}}")
    out = tmp_path / "r.json"
    code, _, stderr = run_cli("run", "--config", cfg, "--out", out)
    assert code == 0, stderr
    cases = {c["id"]: c for c in json.loads(out.read_text(encoding="utf-8"))["cases"]}
    assert cases["q01"]["passed"] is True and cases["q01"]["first_relevant_rank"] == 1
    assert "not JSON" in cases["q03"]["error"] and cases["q03"]["passed"] is None   # an error, not a fail
    assert cases["q04"]["error"] is None                                          # the process went on


def test_command_app_that_cannot_start(seed_project, run_cli, tmp_path):
    cfg = project(seed_project, "app: {type: command, command: [/nonexistent/app]}")
    code, _, stderr = run_cli("run", "--config", cfg, "--out", tmp_path / "r.json")
    assert code == 2 and "cannot start '/nonexistent/app'" in stderr


class _Handler(BaseHTTPRequestHandler):
    seen: list = []

    def log_message(self, *args):
        pass

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        _Handler.seen.append((body, self.headers.get("Authorization")))
        if body["id"] == "q02":
            self.send_response(503)
            self.end_headers()
            return
        data = json.dumps({"answer": "Có. Khách đổi ý chịu phí vận chuyển 30.000 đồng.", "retrieved": None}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture
def http_app():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    _Handler.seen = []
    yield f"http://127.0.0.1:{server.server_address[1]}/answer"
    server.shutdown()
    server.server_close()


def test_http_app(seed_project, run_cli, tmp_path, http_app, monkeypatch):
    monkeypatch.setenv("MY_APP_TOKEN", "tok-SENTINEL-http")
    cfg = project(seed_project, f'app: {{type: http, url: "{http_app}", headers: {{Authorization: "Bearer ${{MY_APP_TOKEN}}"}}}}')
    out = tmp_path / "r.json"
    code, _, stderr = run_cli("run", "--config", cfg, "--out", out)
    assert code == 0, stderr
    result = json.loads(out.read_text(encoding="utf-8"))
    cases = {c["id"]: c for c in result["cases"]}
    assert cases["q04"]["passed"] is True
    assert cases["q04"]["metrics"] == {} and cases["q04"]["checks"]["retrieval"]["status"] == "skipped"
    assert "HTTP 503" in cases["q02"]["error"]
    assert {auth for _, auth in _Handler.seen} == {"Bearer tok-SENTINEL-http"}
    assert {body["id"] for body, _ in _Handler.seen} == {"q01", "q02", "q03", "q04", "q05"}
    assert "tok-SENTINEL-http" not in out.read_text(encoding="utf-8")


def test_offline_demo_is_stable_from_run_to_run(run_cli, tmp_path):
    cfg = ROOT / "examples" / "banhang" / "rageval.yml"
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    assert run_cli("run", "--config", cfg, "--out", a)[0] == 0
    assert run_cli("run", "--config", cfg, "--out", b)[0] == 0
    ra, rb = (json.loads(p.read_text(encoding="utf-8")) for p in (a, b))
    assert ra["summary"] == rb["summary"]
    assert [c["answer"] for c in ra["cases"]] == [c["answer"] for c in rb["cases"]]
    assert ra["summary"]["n_cases"] >= 50 and ra["summary"]["metrics"]["hit@3"] >= 0.95
