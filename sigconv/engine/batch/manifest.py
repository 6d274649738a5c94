"""The batch manifest: one JSON object per line in ``OUTDIR/sigconv-batch.jsonl``.

Each record: input (absolute path), size, mtime_ns, settings (hash of the filter settings), status
("done" or "failed"), output, reason, warnings, fs, filter, seconds, finished (UTC time). Only the
coordinating process writes it (workers return results; the coordinator appends one line per result
as it arrives, flushed and fsynced), so parallel workers never interleave writes. A line cut short by
a crash is ignored when reading. At the end of a run the file is rewritten (temp + rename) with the
latest record per input, so it never holds duplicates.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path
from typing import Optional

from sigconv._core.atomic import atomic_output

NAME = "sigconv-batch.jsonl"
#: Bump when the output of the same settings changes.
SCHEMA = 1


def settings_hash(settings: dict, kind: Optional[str] = None) -> str:
    """Hash of the options that change the output of a file of ``kind`` (not backend, variant, block
    or jobs). ``edges`` applies to tables and NPY logs only: it is left out for audio (so changing
    --edges does not redo audio files, and their hash is the one from before --edges existed);
    ``allow_truncated`` applies to recordings only."""
    drop = ("backend", "variant", "block") + (("edges",) if kind == "audio" else ("allow_truncated",))
    keep = {k: v for k, v in settings.items() if k not in drop}
    keep["schema"] = SCHEMA
    return hashlib.sha256(json.dumps(keep, sort_keys=True, default=str).encode()).hexdigest()[:16]


class Manifest:
    def __init__(self, outdir: Path):
        self.path = Path(outdir) / NAME
        self.records: dict[str, dict] = {}
        self.bad_lines = 0
        if self.path.exists():
            with open(self.path, encoding="utf-8", errors="replace") as f:
                for line in f:
                    line = line.strip()
                    if not line:
                        continue
                    try:
                        rec = json.loads(line)
                        self.records[rec["input"]] = rec
                    except (ValueError, KeyError, TypeError):
                        self.bad_lines += 1  # a line cut short by a crash
        self._f = None

    def up_to_date(self, task: dict) -> bool:
        """Done before with the same file (size, mtime), the same settings, and the output still there."""
        rec = self.records.get(task["input"])
        return bool(rec and rec.get("status") == "done" and rec.get("size") == task["size"]
                    and rec.get("mtime_ns") == task["mtime_ns"] and rec.get("settings") == task["hash"]
                    and rec.get("output") == task["output"] and Path(rec["output"]).exists())

    def append(self, task: dict, result: dict) -> dict:
        rec = {"input": task["input"], "size": task["size"], "mtime_ns": task["mtime_ns"], "settings": task["hash"],
               "status": result["status"], "output": result.get("output"), "reason": result.get("reason"),
               "warnings": result.get("warnings") or [], "fs": result.get("fs"), "filter": result.get("filter"),
               "seconds": round(float(result.get("seconds") or 0.0), 4),
               "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        if result.get("backend"):  # where it ran: the backend, and the GPU the worker was pinned to
            rec["backend"] = result["backend"]
            if result["backend"] == "cuda" and result.get("gpu") is not None:
                rec["gpu"] = result["gpu"]
        if self._f is None:
            if self.bad_lines:  # start from a clean file so that the cut line is not glued to the next one
                self.compact()
            self._f = open(self.path, "a", encoding="utf-8")
        self._f.write(json.dumps(rec) + "\n")
        self._f.flush()
        os.fsync(self._f.fileno())
        self.records[rec["input"]] = rec
        return rec

    def compact(self) -> None:
        """Rewrite with the latest record per input (atomic)."""
        if self._f is not None:
            self._f.close()
            self._f = None
        if not self.records and not self.path.exists():
            return
        with atomic_output(self.path) as tmp, open(tmp, "w", encoding="utf-8") as f:
            for rec in self.records.values():
                f.write(json.dumps(rec) + "\n")
            f.flush()
            os.fsync(f.fileno())
        self.bad_lines = 0

    def close(self) -> None:
        self.compact()
