"""The tune store: one SQLite row per finished job, under the job's key.

Only the process that runs the tune writes it, one transaction per result as the result arrives, so a run cut
short at any point keeps every result it had and a rerun measures only what is missing.  A key is stored once:
a second result for it (a job that two runs, or a retried and a late worker, both finished) is dropped, unless
the run was asked to measure again (`replace`).

The default store is `tune.sqlite` in swzc's private cache folder (swzc.core.cache); a store named with
--store is the user's choice.  Either way it must be a regular file (not a link), it is created 0600, and it
is read as data: SQLite's schema is not trusted (no triggers or views of a foreign file run), and a file that
is not a swzc store is refused.
"""

from __future__ import annotations

import json
import os
import sqlite3
import stat
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from swzc.core import cache
from swzc.core.errors import ExitCode, SwzcError
from swzc.fleet.jobs import Job

APPLICATION_ID = 0x73777A63  # "swzc": marks a SQLite file as a tune store
LAYOUT = 2  # PRAGMA user_version of the table below
COLUMNS = ("key", "file", "digest", "kernel", "kernel_index", "line", "card", "settings", "status", "chosen", "result",
           "measured_on", "host", "tries", "stored_at", "final")
TABLE = """CREATE TABLE results (
    key TEXT PRIMARY KEY, file TEXT NOT NULL, digest TEXT NOT NULL, kernel TEXT NOT NULL, kernel_index INTEGER NOT NULL,
    line INTEGER NOT NULL, card TEXT NOT NULL, settings TEXT NOT NULL, status TEXT NOT NULL, chosen TEXT,
    result TEXT NOT NULL, measured_on TEXT NOT NULL, host TEXT NOT NULL, tries INTEGER NOT NULL, stored_at TEXT NOT NULL,
    final INTEGER NOT NULL)"""
SCHEMA = [("index", "sqlite_autoindex_results_1", None), ("table", "results", TABLE)]  # all a store's schema holds
NAME = "tune.sqlite"


def default_path() -> str:
    """tune.sqlite in swzc's private cache folder; an error where there is no safe one."""
    with cache.folder() as found:
        if found is None:
            raise SwzcError("no private cache folder for the tune store ($XDG_CACHE_HOME/swzc or ~/.cache/swzc): "
                            "name one with --store FILE")
        return os.path.join(found[1], NAME)


class Store:
    def __init__(self, connection: sqlite3.Connection, path: str) -> None:
        self._db = connection
        self.path = path

    def stored(self, keys: Iterable[str]) -> dict[str, dict[str, Any]]:
        """The stored rows among these keys."""
        wanted = list(dict.fromkeys(keys))
        found: dict[str, dict[str, Any]] = {}
        for start in range(0, len(wanted), 500):
            chunk = wanted[start:start + 500]
            rows = self._db.execute(f"SELECT {', '.join(COLUMNS)} FROM results WHERE key IN ({', '.join('?' * len(chunk))})", chunk)
            found.update((row[0], _row(row)) for row in rows)
        return found

    def of_files(self, digests: Iterable[str]) -> list[dict[str, Any]]:
        """Every stored row of the files of these digests (whatever settings measured them), oldest first."""
        wanted = sorted(set(digests))
        found: list[dict[str, Any]] = []
        for start in range(0, len(wanted), 500):
            chunk = wanted[start:start + 500]
            found += [_row(r) for r in self._db.execute(f"SELECT {', '.join(COLUMNS)} FROM results WHERE digest IN "
                                                        f"({', '.join('?' * len(chunk))}) ORDER BY stored_at, rowid", chunk)]
        return found

    def put(self, job: Job, result: dict[str, Any], tries: int, replace: bool = False) -> bool:
        """Store the job's result in one transaction; False where its key holds a final result already (kept,
        unless `replace`).  A result that is not final (an error, a kernel the harness could not run) is replaced
        by the next one."""
        values = (job.key, _text(job.file), job.digest, job.kernel, job.index, job.line, job.card,
                  json.dumps(job.settings.as_dict(), sort_keys=True), str(result.get("status", "")), result.get("chosen"),
                  json.dumps(result, sort_keys=True), str(result.get("measured_on", "")), str(result.get("host", "")), tries,
                  time.strftime("%Y-%m-%dT%H:%M:%S%z"), 1 if result.get("final", True) else 0)
        update = ", ".join(f"{c} = excluded.{c}" for c in COLUMNS[1:])
        with self._db:
            done = self._db.execute(f"INSERT INTO results ({', '.join(COLUMNS)}) VALUES ({', '.join('?' * len(COLUMNS))}) "
                                    f"ON CONFLICT(key) DO UPDATE SET {update} WHERE results.final = 0 OR ?", (*values, replace))
        return done.rowcount == 1

    def rows(self) -> list[dict[str, Any]]:
        return [_row(r) for r in self._db.execute(f"SELECT {', '.join(COLUMNS)} FROM results ORDER BY file, line, card")]


def _text(name: str) -> str:
    """A file name as SQLite's text holds it (UTF-8): bytes that are not UTF-8 shown as U+FFFD; the key names the file."""
    return name.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def _row(row: tuple[Any, ...]) -> dict[str, Any]:
    got = dict(zip(COLUMNS, row))
    try:
        result = json.loads(got["result"])
    except (TypeError, ValueError, RecursionError):
        result = None
    got["result"] = result if isinstance(result, dict) else {"status": "error", "reason": "the stored result is not readable"}
    return got


@contextmanager
def opened(path: str) -> Iterator[Store]:
    """The store at `path`, created if absent; refused (exit 2) where it is not a regular file or not a store."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        info = None
    except OSError as exc:
        raise SwzcError(f"--store {path}: {exc.strerror}", ExitCode.BAD_INPUT) from None
    if info is not None and not stat.S_ISREG(info.st_mode):
        raise SwzcError(f"--store {path}: not a regular file (a link, folder or device is never opened as the store)",
                        ExitCode.BAD_INPUT)
    if info is None:
        try:
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600))
        except FileExistsError:
            pass  # made meanwhile by another run: checked below like any existing file
        except OSError as exc:
            raise SwzcError(f"--store {path}: cannot create it: {exc.strerror}", ExitCode.BAD_INPUT) from None
    try:
        db = sqlite3.connect(path, timeout=60, isolation_level="DEFERRED")
    except sqlite3.Error as exc:
        raise SwzcError(f"--store {path}: {exc}", ExitCode.BAD_INPUT) from None
    try:
        _prepare(db, path)
        yield Store(db, path)
    finally:
        db.close()


def _prepare(db: sqlite3.Connection, path: str) -> None:
    """Set the store up, or check that an existing file is one, before anything of it is read."""
    if hasattr(db, "setconfig") and hasattr(sqlite3, "SQLITE_DBCONFIG_DEFENSIVE"):
        db.setconfig(sqlite3.SQLITE_DBCONFIG_DEFENSIVE, True)
    try:
        db.execute("PRAGMA trusted_schema = OFF")
        application, layout = db.execute("PRAGMA application_id").fetchone()[0], db.execute("PRAGMA user_version").fetchone()[0]
        tables = db.execute("SELECT type, name, sql FROM sqlite_master").fetchall()
    except sqlite3.DatabaseError as exc:
        raise SwzcError(f"--store {path}: not a swzc tune store ({exc})", ExitCode.BAD_INPUT) from None
    if not tables and application == 0:
        with db:
            db.execute(TABLE)
            db.execute(f"PRAGMA application_id = {APPLICATION_ID}")
            db.execute(f"PRAGMA user_version = {LAYOUT}")
        return
    if application != APPLICATION_ID:
        raise SwzcError(f"--store {path}: not a swzc tune store", ExitCode.BAD_INPUT)
    if layout != LAYOUT or sorted(tables, key=lambda t: (t[0], t[1])) != SCHEMA:  # nothing of another's: no trigger, view or table
        raise SwzcError(f"--store {path}: a tune store of another layout ({layout}; this swzc reads {LAYOUT}): name a "
                        "new one with --store", ExitCode.BAD_INPUT)
