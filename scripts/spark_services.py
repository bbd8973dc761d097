"""Real Spark services on loopback, started from the Spark that pyspark installs: a standalone
cluster (one master, N workers) and a Spark Connect server, each with mmlspark loaded.

    python scripts/spark_services.py cluster start [--workers 2] [--dir .spark-cluster]
    python scripts/spark_services.py cluster stop [--dir .spark-cluster]
    python scripts/spark_services.py connect start [--dir .spark-connect]
    python scripts/spark_services.py connect stop [--dir .spark-connect]

`start` prints the URL to use (``spark://127.0.0.1:<port>`` or ``sc://127.0.0.1:<port>``) and
writes it, with the process ids, to ``<dir>/state.json``; `stop` ends every process it started,
executors included. Ports are picked free on 127.0.0.1. Tests use the classes directly, as
context managers, so that everything is stopped even when a test fails.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from types import TracebackType
from typing import Any

import psutil
import pyspark

SPARK_HOME = Path(pyspark.__file__).resolve().parent
EXECUTOR_CLASS = "org.apache.spark.executor.CoarseGrainedExecutorBackend"
CONNECT_SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"


def free_port() -> int:
    """A TCP port nothing listens on at 127.0.0.1 right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _environment() -> dict[str, str]:
    return {
        **os.environ,
        "SPARK_HOME": str(SPARK_HOME),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYSPARK_PYTHON": os.environ.get("PYSPARK_PYTHON", sys.executable),
    }


def _wait(what: str, ready: Any, timeout: float, logs: list[Path]) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if ready():
            return
        time.sleep(0.25)
    tails = "\n".join(f"--- {p}\n{p.read_text()[-3000:]}" for p in logs if p.exists())
    raise RuntimeError(f"{what} not ready after {timeout:.0f} s\n{tails}")


def _stop_group(pid: int, grace: float = 15.0) -> None:
    """Ends a process started in its own session and every process of its group."""
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if not _group_alive(pid):
                return
            time.sleep(0.1)


def _group_alive(pgid: int) -> bool:
    return any(group == pgid for _, group, _ in _processes(""))


def _processes(marker: str) -> list[tuple[int, int, str]]:
    """(pid, process group, command line) of every live (not zombie) process whose command line
    holds `marker`."""
    found = []
    for process in psutil.process_iter(["status", "cmdline"]):
        cmdline = " ".join(process.info["cmdline"] or [])
        if marker not in cmdline or process.info["status"] in (None, psutil.STATUS_ZOMBIE):
            continue
        try:
            found.append((process.pid, os.getpgid(process.pid), cmdline))
        except ProcessLookupError:
            continue
    return found


class _Service:
    """Processes started in sessions of their own, logged under `directory`, all ended by
    :meth:`stop` (also on leaving a ``with`` block, failure or not)."""

    def __init__(self, directory: str | Path, java_options: str = "") -> None:
        self.directory = Path(directory).resolve()
        self.java_options = java_options
        self.pids: list[int] = []

    def _launch(self, name: str, command: list[str]) -> int:
        self.directory.mkdir(parents=True, exist_ok=True)
        log = open(self.directory / f"{name}.log", "w")  # noqa: SIM115 - the child keeps it
        env = _environment()
        if self.java_options:
            env["JAVA_TOOL_OPTIONS"] = self.java_options
        process = subprocess.Popen(
            command,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=self.directory,
            start_new_session=True,
        )
        log.close()
        self.pids.append(process.pid)
        return process.pid

    def logs(self) -> list[Path]:
        return sorted(self.directory.glob("*.log"))

    def stop(self) -> None:
        for pid in reversed(self.pids):
            _stop_group(pid)
        self.pids = []

    def __enter__(self) -> _Service:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.stop()


class StandaloneCluster(_Service):
    """A Spark standalone master and `workers` workers on 127.0.0.1. `java_options` go to every
    JVM of the cluster, the executors the workers start included (in JAVA_TOOL_OPTIONS, which
    they inherit; each JVM notes it in its log)."""

    def __init__(
        self,
        directory: str | Path,
        workers: int = 2,
        cores: int = 1,
        memory: str = "2g",
        java_options: str = "",
    ) -> None:
        super().__init__(directory, java_options)
        self.workers, self.cores, self.memory = workers, cores, memory
        self.port = free_port()
        self.web_port = free_port()
        self.master_url = f"spark://127.0.0.1:{self.port}"
        self.worker_pids: list[int] = []

    def start(self, timeout: float = 90.0) -> StandaloneCluster:
        spark_class = str(SPARK_HOME / "bin" / "spark-class")
        try:
            self._launch(
                "master",
                [
                    spark_class,
                    "org.apache.spark.deploy.master.Master",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(self.port),
                    "--webui-port",
                    str(self.web_port),
                ],
            )
            _wait("standalone master", self._bound, timeout, self.logs())
            _wait("standalone master", lambda: self._state() is not None, timeout, self.logs())
            for i in range(self.workers):
                work = self.directory / f"worker-{i}"
                work.mkdir(parents=True, exist_ok=True)
                pid = self._launch(
                    f"worker-{i}",
                    [
                        spark_class,
                        "org.apache.spark.deploy.worker.Worker",
                        "--host",
                        "127.0.0.1",
                        "--webui-port",
                        str(free_port()),
                        "--cores",
                        str(self.cores),
                        "--memory",
                        self.memory,
                        "--work-dir",
                        str(work),
                        self.master_url,
                    ],
                )
                self.worker_pids.append(pid)
            _wait(
                f"{self.workers} standalone workers",
                lambda: (self._state() or {}).get("aliveworkers") == self.workers,
                timeout,
                self.logs(),
            )
        except BaseException:
            self.stop()
            raise
        return self

    def _bound(self) -> bool:
        """Whether the master has said where it listens. Spark moves to the next port when the
        one asked for was taken in the meantime, so the ports are read back from its log."""
        log = self.directory / "master.log"
        text = log.read_text(errors="replace") if log.exists() else ""
        master = re.search(r"Starting Spark master at (spark://\S+:(\d+))", text)
        web = re.search(r"MasterWebUI.* started at https?://\S+:(\d+)", text)
        if master is None or web is None:
            return False
        self.master_url, self.port = master.group(1), int(master.group(2))
        self.web_port = int(web.group(1))
        return True

    def _state(self) -> dict[str, Any] | None:
        try:
            url = f"http://127.0.0.1:{self.web_port}/json/"
            with urllib.request.urlopen(url, timeout=2) as response:
                return dict(json.load(response))
        except (OSError, ValueError):  # not up yet, or a page that is not the master's JSON
            return None

    def applications(self) -> list[dict[str, Any]]:
        """The master's view of running and completed applications."""
        state = self._state() or {}
        return list(state.get("activeapps", [])) + list(state.get("completedapps", []))

    def executor_pids(self) -> dict[int, list[int]]:
        """Worker index -> pids of the executor JVMs it runs now."""
        groups = {pid: i for i, pid in enumerate(self.worker_pids)}
        found: dict[int, list[int]] = {i: [] for i in range(len(self.worker_pids))}
        for pid, group, _ in _processes(EXECUTOR_CLASS):
            if group in groups:
                found[groups[group]].append(pid)
        return found


class ConnectServer(_Service):
    """A Spark Connect server on 127.0.0.1 whose sessions run on `master`, with `conf`
    (``mmlspark.spark_conf()`` to load mmlspark)."""

    def __init__(
        self, directory: str | Path, conf: dict[str, str], master: str = "local[2]"
    ) -> None:
        super().__init__(directory)
        self.conf, self.master = conf, master
        self.port = free_port()
        self.url = f"sc://127.0.0.1:{self.port}"

    def start(self, timeout: float = 180.0) -> ConnectServer:
        settings = {
            **self.conf,
            "spark.connect.grpc.binding.address": "127.0.0.1",
            "spark.connect.grpc.binding.port": str(self.port),
            "spark.ui.enabled": "false",
            "spark.driver.host": "127.0.0.1",
        }
        command = [
            str(SPARK_HOME / "bin" / "spark-submit"),
            "--master",
            self.master,
            "--class",
            CONNECT_SERVER_CLASS,
            "--name",
            "mmlspark Spark Connect server",
        ]
        for key, value in settings.items():
            command += ["--conf", f"{key}={value}"]
        try:
            self._launch("connect-server", [*command, "spark-internal"])
            _wait("Spark Connect server", self._listening, timeout, self.logs())
        except BaseException:
            self.stop()
            raise
        return self

    def _listening(self) -> bool:
        if not self.pids or not _group_alive(self.pids[0]):
            raise RuntimeError(
                "the Spark Connect server exited:\n"
                + "\n".join(p.read_text()[-3000:] for p in self.logs())
            )
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            return s.connect_ex(("127.0.0.1", self.port)) == 0


def _main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("service", choices=["cluster", "connect"])
    parser.add_argument("action", choices=["start", "stop"])
    parser.add_argument("--dir", help="where logs and state go (default .spark-<service>)")
    parser.add_argument("--workers", type=int, default=2, help="cluster: number of workers")
    parser.add_argument("--cores", type=int, default=1, help="cluster: cores of each worker")
    parser.add_argument("--memory", default="2g", help="cluster: memory of each worker")
    parser.add_argument("--master", default="local[2]", help="connect: its sessions' master")
    args = parser.parse_args(argv)
    directory = Path(args.dir or f".spark-{args.service}").resolve()
    state_file = directory / "state.json"
    if args.action == "stop":
        if not state_file.exists():
            print(f"nothing started from {directory}")
            return 0
        for pid in reversed(json.loads(state_file.read_text())["pids"]):
            _stop_group(pid)
        state_file.unlink()
        print(f"stopped the {args.service} started from {directory}")
        return 0
    if state_file.exists():
        print(f"already started: {json.loads(state_file.read_text())['url']}", file=sys.stderr)
        return 1
    service: StandaloneCluster | ConnectServer
    if args.service == "cluster":
        service = StandaloneCluster(directory, args.workers, args.cores, args.memory).start()
        url = service.master_url
    else:
        import mmlspark

        service = ConnectServer(directory, mmlspark.spark_conf(), args.master).start()
        url = service.url
    state_file.write_text(json.dumps({"url": url, "pids": service.pids}))
    print(url)
    return 0


if __name__ == "__main__":
    sys.exit(_main())
