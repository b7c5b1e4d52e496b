"""The content-addressed response cache of ``LLMClient`` (``rageval.pipeline.llm``) on disk.

Key = sha256 of canonical JSON of the cache version, the request kind, the endpoint host, the
model and every request parameter; embeddings are keyed per text (model + text). The API key is
never part of a key or a file. Files are ``<cache_dir>/<kk>/<key>.json``, written to a temporary
file and renamed into place, so a crash never leaves half a file; an unreadable or implausible
file is a miss (and is overwritten by the next write). An entry is read only when it is a regular
file (not a symlink, device or FIFO: a link to ``/dev/zero`` once cost 1.5 GB) of at most
``MAX_ENTRY_BYTES``, strictly (``rageval.parse``); anything else is a miss, replaced by the next
write, which never writes through a link.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from rageval.errors import ConfigError, ModelError, RagevalError
from rageval.files import write_bytes
from rageval.parse import load_json, read_bytes
from rageval.pipeline.llm_parse import is_count, is_number

CACHE_VERSION = 1
#: The largest entry read: a request (the prompt with its whole context) and its response. A chat
#: prompt of top_k 1000 chunks is ~1 MB and a 3,072-dimension embedding ~70 KB; 16 MiB leaves room.
MAX_ENTRY_BYTES = 16 * 2**20
CACHE_UNWRITABLE = "llm.cache_dir: cannot write the response cache at {path}: {error}. Point llm.cache_dir at a writable folder."


class ResponseCache:
    """Responses of one endpoint host under ``directory``. Safe to share across threads: every
    write is a rename of a complete file."""

    def __init__(self, directory: Path, host: str) -> None:
        self.directory = directory
        self._host = host

    def key(self, kind: str, request: dict[str, Any]) -> str:
        canonical = json.dumps({"v": CACHE_VERSION, "kind": kind, "host": self._host, **request},
                               sort_keys=True, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
        return hashlib.sha256(canonical.encode("utf-8")).hexdigest()

    def path(self, key: str) -> Path:
        return self.directory / key[:2] / f"{key}.json"

    def read(self, key: str, kind: str) -> dict[str, Any] | None:
        """The stored response for ``key``, or None when there is none that is usable."""
        path = self.path(key)
        try:      # strictly, like every file rageval reads: a broken or hostile cache file is a miss
            data = read_bytes(path, error=ModelError, limit=MAX_ENTRY_BYTES, links=False)
            record = load_json(data, str(path), error=ModelError)
        except RagevalError:
            return None
        if not isinstance(record, dict) or record.get("key") != key or record.get("kind") != kind:
            return None
        response = record.get("response")
        if not isinstance(response, dict):
            return None
        if kind == "chat":
            ok = (isinstance(response.get("text"), str) and isinstance(response.get("model"), str)
                  and isinstance(response.get("refusal"), str | None)
                  and is_count(response.get("prompt_tokens")) and is_count(response.get("completion_tokens")))
        else:
            vector = response.get("embedding")
            ok = isinstance(vector, list) and bool(vector) and all(is_number(v) for v in vector)
        return response if ok else None

    def write(self, key: str, kind: str, request: dict[str, Any], response: dict[str, Any]) -> None:
        """Store atomically; an unwritable cache folder is a ``ConfigError``."""
        path = self.path(key)
        record = {"v": CACHE_VERSION, "key": key, "kind": kind, "host": self._host,
                  "request": request, "response": response}
        data = json.dumps(record, ensure_ascii=False, sort_keys=True).encode("utf-8")
        try:
            write_bytes(path, data, replace=True)   # ours: a planted link is replaced, not written through
        except RagevalError as exc:
            raise ConfigError(CACHE_UNWRITABLE.format(path=self.directory, error=exc.message)) from None
