"""The driver JVM's options, chosen before it starts, for the run it is started for.

`flow-pipeline` run directly (not under spark-submit) starts its own JVM once its options
are parsed, so what a JVM only takes at start can still be fitted to the run, and a local
history's size is known from a listing in Python (the names `pipeline/layout.py` will pick;
no JVM needed). Three choices (their figures:
docs/benchmarks.md#the-pipelines-jvm-and-spark-settings):

- Class data sharing (AppCDS): a run writes the classes it loaded to an archive in the
  user's cache once; later runs map them instead of loading and verifying them from
  Spark's jars, seconds of every start and of the first, cold plan analyses.
- Small runs (up to `SMALL_RUN` records) stop the JIT at its first tier (C1): such a run
  is mostly cold plan analysis, which C1 compiles sooner; a large run spends its time in
  generated code, which C2 compiles better.
- The heap: in local mode the driver is also the executor, and sorting a large history in
  too small a heap spills; it grows with the records, up to a share of the machine's RAM.

Nothing here may fail or slow a run: a history on a cluster file system, a cache that
cannot be written, an archive from another Java or Spark install, or one that could not be
written (a non-empty directory on the class path stops the JVM from writing it) all give
a run as before, with the JVM's defaults.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from pipeline.layout import estimated_records, to_read

SMALL_RUN = 1_000_000  # records; larger runs keep the JIT's C2
GIB = 2**30
BASE_HEAP = 2 * GIB  # enough for 2M records on local[2] (pipeline/tuning.py)
HEAP_PER_RECORD = 300  # bytes of heap a record beyond that: 4 GiB for 10M records
RAM_SHARE = 0.5  # at most this much of the machine's memory for the heap
# the JVM's class-data-sharing messages would otherwise go to standard output
QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"
WRITE_TIMEOUT = 120.0  # seconds a JVM is given to write the archive as it exits


def local_path(history: str) -> Path | None:
    """The local path `history` names, or None for another file system's URI."""
    parsed = urlparse(history)
    if parsed.scheme == "file":
        return Path(parsed.path)
    return None if parsed.scheme else Path(history)


def listing(path: Path) -> dict[str, int]:
    """Every file under `path` (or `path` itself) with its length in bytes."""
    if path.is_file():
        return {str(path): path.stat().st_size}
    found = {}
    for directory, _, names in os.walk(path):
        for name in names:
            try:
                found[os.path.join(directory, name)] = os.path.getsize(
                    os.path.join(directory, name))
            except OSError:  # deleted since the walk saw it (compaction, retention)
                continue
    return found


def estimated(history: str, since: float | None = None, until: float | None = None
              ) -> int | None:
    """About how many records a run over `history` reads, or None when it is not local."""
    path = local_path(history)
    if path is None or not path.exists():
        return None
    files, root = listing(path), str(path)
    return estimated_records(files, root, to_read(files, root, since, until))


def heap_bytes(records: int, physical: int) -> int:
    """The driver heap for a local run over `records` records on a machine with
    `physical` bytes of memory: BASE_HEAP, more for large runs, at most RAM_SHARE."""
    wanted = BASE_HEAP + max(0, records - 2_000_000) * HEAP_PER_RECORD
    return max(BASE_HEAP, min(wanted, int(physical * RAM_SHARE)) // GIB * GIB)


def _physical_memory() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return 2 * BASE_HEAP


def _cache_directory() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(Path.home(), ".cache")
    return Path(base) / "flow-pipeline"


def _install_key() -> str | None:
    """What an archive is only valid for: this Java, this Spark's jars as they are, and
    the configuration directories spark-class puts on the class path (one of those that
    holds files stops the JVM from writing an archive at all)."""
    from pyspark.find_spark_home import _find_spark_home

    java_home = os.environ.get("JAVA_HOME")
    java = os.path.join(java_home, "bin", "java") if java_home else shutil.which("java")
    jars = Path(_find_spark_home()) / "jars"
    if java is None or not jars.is_dir():
        return None
    digest = hashlib.sha256(" ".join(os.environ.get(name, "") for name in (
        "SPARK_CONF_DIR", "HADOOP_CONF_DIR", "YARN_CONF_DIR")).encode())
    for path in [Path(os.path.realpath(java)), *sorted(jars.iterdir())]:
        stat = path.stat()
        digest.update(f"{path}:{stat.st_size}:{stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()[:16]


@dataclass
class ClassArchive:
    """The class-data archive of this install in `directory`: used when it is there,
    written by this run when it is not (to a name of this process, renamed into place
    once the JVM has exited and written all of it)."""

    directory: Path
    key: str
    pid: int = field(default_factory=os.getpid)

    @property
    def path(self) -> Path:
        return self.directory / f"spark-{self.key}.jsa"

    @property
    def partial(self) -> Path:
        return self.directory / f"spark-{self.key}.{self.pid}.partial"

    @property
    def failed(self) -> Path:
        return self.directory / f"spark-{self.key}.failed"

    def options(self) -> list[str]:
        """The JVM options: map the archive, or write it at exit (unless that failed
        before for this install)."""
        if self.path.is_file():
            return [f"-XX:SharedArchiveFile={self.path}", QUIET]
        if self.failed.exists():
            return []
        return [f"-XX:ArchiveClassesAtExit={self.partial}", QUIET]

    def writing(self) -> bool:
        return not self.path.is_file() and not self.failed.exists()

    def written(self, exited_cleanly: bool) -> None:
        """After the JVM writing the archive has exited: put the archive in place (and
        drop the archives of other installs), or remember this install cannot."""
        try:
            if exited_cleanly and self.partial.is_file() and self.partial.stat().st_size:
                os.replace(self.partial, self.path)
                for old in self.directory.glob("spark-*.jsa"):
                    if old != self.path:
                        old.unlink(missing_ok=True)
            else:
                self.partial.unlink(missing_ok=True)
                self.failed.touch()
        except OSError:
            pass


def class_archive() -> ClassArchive | None:
    """This install's archive in the user's cache, or None when there is no writable
    cache or the install cannot be identified."""
    directory = _cache_directory()
    try:
        directory.mkdir(parents=True, exist_ok=True)
        key = _install_key()
    except OSError:
        return None
    if key is None or not os.access(directory, os.W_OK):
        return None
    return ClassArchive(directory, key)


@dataclass
class Launch:
    """How the driver JVM of a run is started: its heap (None: the caller's default)
    and its options, and the archive this run writes, if any."""

    driver_memory: str | None = None
    java_options: list[str] = field(default_factory=list)
    archive: ClassArchive | None = None

    def stopped(self, gateway: Any) -> None:
        """After the session has stopped: when this run writes the class archive, end the
        JVM (it exits when its standard input closes, and writes the archive as it
        does), wait for it, and put the archive in place."""
        if self.archive is None or not self.archive.writing():
            return
        process = getattr(gateway, "proc", None)
        if process is None or process.stdin is None:
            return
        process.stdin.close()
        try:
            code = process.wait(timeout=WRITE_TIMEOUT)
        except subprocess.TimeoutExpired:  # still writing: a later run writes its own
            return
        self.archive.written(code == 0)


def for_run(history: str, master: str | None, since: float | None = None,
            until: float | None = None) -> Launch:
    """The launch of a run over `history` on `master` (None: pyspark's local default).
    Under spark-submit (the JVM is running already) or for a history that is not local:
    nothing chosen."""
    if "PYSPARK_GATEWAY_PORT" in os.environ:
        return Launch()
    archive = class_archive()
    options = archive.options() if archive else []
    records = estimated(history, since, until)
    if records is None:
        return Launch(java_options=options, archive=archive)
    if records <= SMALL_RUN:
        options.append("-XX:TieredStopAtLevel=1")
    memory = None
    if master is None or master.startswith("local"):
        memory = f"{heap_bytes(records, _physical_memory()) // GIB}g"
    return Launch(memory, options, archive)
