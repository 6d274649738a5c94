"""The batch manifest: one JSON object per line in ``OUTDIR/sigconv-batch.jsonl``.

Each record: input (absolute path), size, mtime_ns, settings (hash of the filter settings), status
("done" or "failed"), output, reason, warnings, fs, filter, seconds, finished (UTC time); a done file also
output_size and output_mtime_ns (its output as written: a rerun skips the file only while its output still
matches, and redoes it when it was changed) and, for tables and NPY logs, columns (the channels filtered). The
outputs the records name are the batch's own, the only files it replaces without --force. A failed file whose
output from an earlier run stays in place keeps it as kept_output (path, size, mtime_ns), so that the batch may
still replace it. A done record without output_size (written by an older sigconv) is redone. Only the
coordinating process writes it (workers return results; the coordinator appends one line per result
as it arrives, flushed and fsynced), so parallel workers never interleave writes. A line cut short by
a crash is ignored when reading. At the end of a run the file is rewritten (temp + rename) with the
latest record per input, so it never holds duplicates.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
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


def _stamp(path) -> Optional[tuple]:
    """(size, mtime_ns) of the regular file at ``path`` (through a symbolic link, which outputs are written
    through); None when there is none."""
    try:
        st = os.stat(path)
    except (OSError, TypeError, ValueError):
        return None
    return (st.st_size, st.st_mtime_ns) if stat.S_ISREG(st.st_mode) else None


def _written(rec: dict) -> Optional[tuple]:
    """(path, (size, mtime_ns)) of the output a record says the batch wrote and left in place, or None."""
    if rec.get("status") == "done" and isinstance(rec.get("output"), str):
        size, mtime = rec.get("output_size"), rec.get("output_mtime_ns")
        path = rec["output"]
    elif isinstance(rec.get("kept_output"), dict):
        k = rec["kept_output"]
        path, size, mtime = k.get("path"), k.get("size"), k.get("mtime_ns")
    else:
        return None
    if isinstance(path, str) and isinstance(size, int) and isinstance(mtime, int):
        return path, (size, mtime)
    return None


def _written_before(rec: dict) -> Optional[tuple]:
    """:func:`_written` for a done record without output_size (an older sigconv's): (path, its file's (size,
    mtime_ns) now), or None when there is no file there."""
    path = rec.get("output")
    if rec.get("status") != "done" or "output_size" in rec or not isinstance(path, str):
        return None
    now = _stamp(path)
    return (path, now) if now is not None else None


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
        self._written: Optional[dict] = None  # output -> (size, mtime_ns) of what the batch wrote there

    def up_to_date(self, task: dict) -> bool:
        """Done before with the same file (size, mtime), the same settings, and its output still there as it was
        written (same size and mtime; a record without them, from an older sigconv, is not up to date)."""
        rec = self.records.get(task["input"])
        return bool(rec and rec.get("status") == "done" and rec.get("size") == task["size"]
                    and rec.get("mtime_ns") == task["mtime_ns"] and rec.get("settings") == task["hash"]
                    and rec.get("output") == task["output"]
                    and _written(rec) == (rec["output"], _stamp(rec["output"])))

    def written(self, output: str) -> Optional[tuple]:
        """(size, mtime_ns) of the file this manifest records the batch wrote at ``output`` (a done record's output,
        or a failed record's kept_output), or None when it records none. For a record of an older sigconv, which
        has no output size: the file there now."""
        if self._written is None:
            self._written = {}
            for rec in self.records.values():
                w = _written(rec) or _written_before(rec)
                if w is not None:
                    self._written[w[0]] = w[1]
        return self._written.get(output)

    def append(self, task: dict, result: dict) -> dict:
        rec = {"input": task["input"], "size": task["size"], "mtime_ns": task["mtime_ns"], "settings": task["hash"],
               "status": result["status"], "output": result.get("output"), "reason": result.get("reason"),
               "warnings": result.get("warnings") or [], "fs": result.get("fs"), "filter": result.get("filter"),
               "seconds": round(float(result.get("seconds") or 0.0), 4),
               "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        if rec["status"] == "done" and rec["output"]:
            stamp = _stamp(rec["output"])
            if stamp is not None:
                rec["output_size"], rec["output_mtime_ns"] = stamp
        else:  # the output an earlier run wrote, still in place, stays the batch's own
            w = _written(self.records.get(task["input"]) or {})
            if w is not None and _stamp(w[0]) is not None:
                rec["kept_output"] = {"path": w[0], "size": w[1][0], "mtime_ns": w[1][1]}
        if result.get("columns") is not None:
            rec["columns"] = list(result["columns"])
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
        self._written = None
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
