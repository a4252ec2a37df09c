"""File operations on any URI Spark reads (local, HDFS, S3), through Hadoop's FileSystem.

History, compacted hours and the incremental state may live on a cluster's storage, so
the few operations the driver makes itself (list, rename, delete, a small marker file) go
through the JVM's Hadoop client of the running session, never through Python's `os`.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import SparkSession


class HistoryNotFound(Exception):
    """The history path does not exist."""


class Files:
    """Hadoop FileSystem calls for the file system of `uri`."""

    def __init__(self, spark: SparkSession, uri: str) -> None:
        jvm = spark.sparkContext._jvm
        assert jvm is not None
        self._path = jvm.org.apache.hadoop.fs.Path
        self._io = jvm.org.apache.commons.io.IOUtils
        conf = spark.sparkContext._jsc.hadoopConfiguration()
        self.fs: Any = self._path(uri).getFileSystem(conf)

    def qualified(self, uri: str) -> str:
        return str(self.fs.makeQualified(self._path(uri)).toString())

    def exists(self, uri: str) -> bool:
        return bool(self.fs.exists(self._path(uri)))

    def files(self, uri: str) -> dict[str, int]:
        """Every file under `uri`, recursively, fully qualified, with its length in bytes
        (one listing call)."""
        found, listing = {}, self.fs.listFiles(self._path(uri), True)
        while listing.hasNext():
            status = listing.next()
            found[str(status.getPath().toString())] = int(status.getLen())
        return found

    def children(self, uri: str) -> list[str]:
        if not self.exists(uri):
            return []
        return [str(s.getPath().toString()) for s in self.fs.listStatus(self._path(uri))]

    def size(self, uri: str) -> int:
        return int(self.fs.getContentSummary(self._path(uri)).getLength())

    def rename(self, source: str, target: str) -> None:
        self.fs.mkdirs(self._path(target).getParent())
        if not self.fs.rename(self._path(source), self._path(target)):
            raise OSError(f"cannot rename {source} to {target}")

    def delete(self, uri: str) -> None:
        self.fs.delete(self._path(uri), True)

    def read_text(self, uri: str) -> str | None:
        if not self.exists(uri):
            return None
        stream = self.fs.open(self._path(uri))
        try:
            return str(self._io.toString(stream, "UTF-8"))
        finally:
            stream.close()

    def write_text(self, uri: str, text: str) -> None:
        """Write a small file whole: to a hidden name first, then renamed over `uri`."""
        temporary = self._path(uri).getParent().toString() + "/.tmp-" + self._path(uri).getName()
        stream = self.fs.create(self._path(temporary), True)
        try:
            stream.write(bytearray(text.encode()))
        finally:
            stream.close()
        self.fs.delete(self._path(uri), False)
        self.rename(temporary, uri)


def list_paths(spark: SparkSession, root: str) -> tuple[str, dict[str, int]]:
    """(root, every file under it with its length), fully qualified."""
    files = Files(spark, root)
    if not files.exists(root):
        raise HistoryNotFound(f"Path does not exist: {root}")
    return files.qualified(root), files.files(root)
