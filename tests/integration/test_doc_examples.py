"""Every example of every page in docs/ and of the README's tour, run verbatim against a real
flow-sidecar and the real broker, in page order, as a reader would run them.

Each page gets a directory of its own that looks like the repository (its top level linked,
`client/` copied so a `pip install ./client` builds nowhere near the work tree) and a
sidecar of its own on 127.0.0.1:8080, the address the pages name, with the page's
`data/` as its data directory: no other sidecar may listen there meanwhile. A block that is
`bash deploy/run.sh [ARGS]` (re)starts that sidecar with ARGS instead of running the
script. Shell blocks run under `bash -e -o pipefail` with a `curl` that fails on an HTTP
error (`--fail-with-body`), so a refused request fails its block; Python blocks run with
the project's interpreter, where `deploy/run.sh` installs the client; between blocks the
test waits for the sidecar's next complete poll, as a reader's typing does. Markers
(`<!-- not run: why -->`, `output`, `background`, `file`): tests/utils/doc_examples.py.
Queues and exchanges a page made (new ones its examples name) are deleted after it."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
import requests

from tests.utils.broker_target import AUTH, MANAGEMENT_URL, RETARGETED
from tests.utils.doc_examples import Example, examples, json_keys, section
from tests.utils.sidecar_process import SidecarProcess, eventually

ROOT = Path(__file__).resolve().parents[2]
PORT = 8080  # the pages' http://127.0.0.1:8080
RUN_SH = re.compile(r"^bash deploy/run\.sh((?:[ \t]+[^#\s]\S*)*)[ \t]*(?:#.*)?$")
BLOCK_TIMEOUT = 300.0


def page_examples() -> list[tuple[Path, list[Example]]]:
    readme = ROOT / "README.md"
    pages = [(readme, examples(readme, section(readme.read_text(), "## Using it")))]
    pages += [(page, examples(page)) for page in sorted((ROOT / "docs").glob("*.md"))]
    return [(page, found) for page, found in pages
            if any(e.kind in ("run", "background") for e in found)]


def page_dir(base: Path) -> Path:
    """A directory that looks like the repository to a page's commands."""
    base.mkdir()
    for entry in ROOT.iterdir():
        if entry.name in (".git", "client", "data", "report"):
            continue
        (base / entry.name).symlink_to(entry)
    shutil.copytree(ROOT / "client", base / "client",
                    ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    shims = base / ".doc-test-bin"
    shims.mkdir()
    curl = shutil.which("curl")
    assert curl, "the pages use curl"
    (shims / "curl").write_text(f'#!/bin/sh\nexec {curl} --fail-with-body "$@"\n')
    (shims / "curl").chmod(0o755)
    return base


def printed_keys(output: str) -> set[str]:
    """Every key of every JSON object printed (curl prints answers back to back)."""
    decoder, i = json.JSONDecoder(), 0
    keys: set[str] = set()

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            keys.update(value)
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    while (i := output.find("{", i)) >= 0:
        try:
            value, end = decoder.raw_decode(output, i)
        except ValueError:
            i += 1
            continue
        walk(value)
        i = end
    return keys


def names(kind: str) -> set[tuple[str, str]]:
    answer = requests.get(f"{MANAGEMENT_URL}/api/{kind}?columns=vhost,name", auth=AUTH,
                          timeout=10)
    answer.raise_for_status()
    return {(item["vhost"], item["name"]) for item in answer.json()}


class PageRun:
    """One page's examples in order, with its sidecar and its background terminals."""

    def __init__(self, page: Path, base: Path) -> None:
        self.page = page
        self.base = page_dir(base)
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("FLOW_")}
        self.env["PATH"] = f"{self.base / '.doc-test-bin'}{os.pathsep}{self.env['PATH']}"
        self.env["FLOW_SIDECAR_URL"] = f"http://127.0.0.1:{PORT}"
        self.sidecar: SidecarProcess | None = None
        self.background: list[tuple[subprocess.Popen[bytes], Path]] = []
        self.last_output = ""

    def start_sidecar(self, args: list[str]) -> None:
        self.stop_sidecar()
        with socket.socket() as probe:
            taken = probe.connect_ex(("127.0.0.1", PORT)) == 0
        assert not taken, (f"127.0.0.1:{PORT} is taken (a sidecar of deploy/run.sh?): the doc "
                           "examples' sidecar listens there, as the pages say")
        self.sidecar = SidecarProcess(self.base / "data", *args, port=PORT).start()

    def stop_sidecar(self) -> None:
        if self.sidecar:
            self.sidecar.stop()
            self.sidecar = None

    def settle(self) -> None:
        """Wait for a poll that began after the last block ended."""
        sidecar = self.sidecar
        assert sidecar

        def cycles() -> int:
            return int(sidecar.get("/healthz").json()["poller"]["cycles"])

        first = cycles()
        eventually(lambda: cycles() >= first + 2, timeout=30)

    def run(self, example: Example) -> None:
        if example.kind in ("not run", "file"):
            return
        if example.kind == "output":
            self.check_output(example)
            return
        started = RUN_SH.match(example.body.strip())
        if started and example.kind == "run":
            self.start_sidecar(shlex.split(started.group(1)))
            return
        if self.sidecar is None:
            self.start_sidecar([])
        if example.kind == "background":
            self.start_background(example)
        else:
            self.run_block(example)
        self.settle()

    def command(self, example: Example) -> list[str]:
        if example.language == "python":
            script = self.base / f"example-{example.line}.py"
            script.write_text(example.body + "\n")
            return [sys.executable, str(script)]
        if example.language == "js":
            return ["node", "-e", example.body]
        return ["bash", "-e", "-o", "pipefail", "-c", example.commands()]

    def run_block(self, example: Example) -> None:
        try:
            done = subprocess.run(self.command(example), cwd=self.base, env=self.env,
                                  stdin=subprocess.DEVNULL, capture_output=True, text=True,
                                  timeout=BLOCK_TIMEOUT, check=False)
        except subprocess.TimeoutExpired as exc:
            pytest.fail(self.report(example, f"still running after {BLOCK_TIMEOUT:.0f} s",
                                    str(exc.stdout or "") + str(exc.stderr or "")))
        self.last_output = done.stdout
        if done.returncode != 0:
            pytest.fail(self.report(example, f"exit {done.returncode}",
                                    done.stdout + done.stderr))

    def start_background(self, example: Example) -> None:
        log = self.base / f"background-{example.line}.log"
        with open(log, "wb") as out:
            process = subprocess.Popen(self.command(example), cwd=self.base, env=self.env,
                                       stdin=subprocess.DEVNULL, stdout=out,
                                       stderr=subprocess.STDOUT, start_new_session=True)
        self.background.append((process, log))
        if not example.note.startswith("until "):
            return
        text = example.note.removeprefix("until ").strip()
        deadline = time.monotonic() + 60
        while text not in log.read_text(errors="replace"):
            if process.poll() is not None or time.monotonic() > deadline:
                pytest.fail(self.report(example, f"never printed {text!r}",
                                        log.read_text(errors="replace")))
            time.sleep(0.1)

    def check_output(self, example: Example) -> None:
        shown = json_keys(example.body)
        missing = sorted(shown - printed_keys(self.last_output))
        assert not missing, self.report(example, f"the answer shown names {missing}, which the "
                                        "block above did not print", self.last_output)

    def report(self, example: Example, what: str, output: str) -> str:
        log = self.sidecar.log()[-3000:] if self.sidecar else ""
        return (f"{example.where}: {what}\n--- the block ---\n{example.body}\n"
                f"--- its output ---\n{output[-6000:]}\n--- the sidecar's log (tail) ---\n{log}")

    def close(self) -> None:
        for process, _ in self.background:
            if process.poll() is None:
                os.killpg(process.pid, 9)
            process.wait(10)
        self.stop_sidecar()


def delete_new(kind: str, before: set[tuple[str, str]], text: str) -> None:
    """Delete what a page's examples made: new since the page began, and named in them."""
    for vhost, name in names(kind) - before:
        if re.search(rf"(?<![\w.-]){re.escape(name)}(?![\w.-])", text):
            requests.delete(f"{MANAGEMENT_URL}/api/{kind}/{quote(vhost, safe='')}/"
                            f"{quote(name, safe='')}", auth=AUTH, timeout=10)


PAGES = page_examples()


@pytest.fixture
def page_run(request: pytest.FixtureRequest, tmp_path: Path,
             broker_available: None) -> Iterator[PageRun]:
    if RETARGETED:
        pytest.skip("the pages' examples use the local broker, as a new reader's do")
    page: Path = request.param
    queues, exchanges = names("queues"), names("exchanges")
    run = PageRun(page, tmp_path / page.stem)
    try:
        yield run
    finally:
        run.close()
        text = "\n".join(e.body for e in dict(PAGES)[page])
        delete_new("exchanges", exchanges, text)
        delete_new("queues", queues, text)


# a page's blocks may install a virtualenv and npm packages: minutes on a loaded machine
@pytest.mark.timeout(900)
@pytest.mark.parametrize("page_run", [page for page, _ in PAGES], indirect=True,
                         ids=[str(page.relative_to(ROOT)) for page, _ in PAGES])
def test_every_example_runs_verbatim(page_run: PageRun) -> None:
    for example in dict(PAGES)[page_run.page]:
        started = time.monotonic()
        page_run.run(example)
        print(f"{example.where} {example.kind}: {time.monotonic() - started:.1f} s")
