"""The team's evaluation adapter, as `app: {type: command, command: [python, -m, myapp.eval_adapter]}`
runs it: one ``{"id", "question"}`` request per line on stdin, one trace per line on stdout.

Its "RAG pipeline" answers from a JSONL of traces (``MYAPP_TRACES``), standing in for the team's
own retrieval and generation code. With ``MYAPP_ENV_DUMP`` set, it writes the names of the
environment variables it was started with to that file (the tests check what it can see).
"""

import json
import os
import sys


def main() -> None:
    dump = os.environ.get("MYAPP_ENV_DUMP")
    if dump:
        with open(dump, "w", encoding="utf-8") as fh:
            json.dump(sorted(os.environ), fh)
    with open(os.environ["MYAPP_TRACES"], encoding="utf-8") as fh:
        traces = {t["id"]: t for t in map(json.loads, fh)}
    for line in sys.stdin:
        request = json.loads(line)
        trace = traces.get(request["id"]) or {"id": request["id"], "error": "no trace for this case"}
        sys.stdout.write(json.dumps(trace, ensure_ascii=False) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
