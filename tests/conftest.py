"""One local SparkSession with the mmlspark jar for the whole test run."""

from __future__ import annotations

import importlib
import os
import pkgutil
import platform
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy.testing  # noqa: F401 - its import runs `lscpu` once: here, not inside a test
import pytest

import mmlspark
from mmlspark.core.compat import connect_ml_supported
from mmlspark.core.wrapper import MMLParams

# `uname -p`, which Python runs once per process and caches: here, not inside a test (importing
# mlflow asks for it).
platform.processor()

ROOT = Path(__file__).resolve().parent.parent
DEMO_NOTEBOOK = ROOT / "notebooks" / "02_camera_trap_transfer_learning.ipynb"
sys.path.insert(0, str(ROOT / "scripts"))
from spark_lines import LINES_MARK, line_test_files  # noqa: E402
from spark_services import ConnectServer, StandaloneCluster  # noqa: E402

#: The tiers, by what a test starts. `unit` and `integration` are given by the fixtures a test
#: uses; `system` and `lines` are marked by hand (a module's `pytestmark`, or a decorator).
TIERS = {
    "unit": "starts nothing: no JVM, no server, no process",
    "integration": "uses the shared local session or a shared Spark Connect server, no process",
    "system": "starts processes of its own (CLIs, clusters, notebooks, servers, benchmarks), "
    "or runs the whole camera-trap demo",
    "lines": "runs on every supported Spark line too (scripts/spark_lines.py, make test-lines)",
}
#: Fixtures that put a test on the shared JVM or a shared Connect server.
SHARED_SESSIONS = frozenset(
    {"spark", "session", "connect_spark", "connect_server", "jarless_connect", "jarless_server"}
)  # fmt: skip
#: Fixtures that run a whole job end to end (the camera-trap demo: hundreds of Spark jobs), which
#: put a test in the system tier though it starts no process.
WHOLE_JOBS = frozenset({"demo_run"})


def jvm_options_of_tests() -> str:
    """The test drivers' JVM settings (SPARK_SUBMIT_OPTS: the Makefile's TEST_JVM_OPTS), less
    their class archive, which only the drivers' class path matches."""
    options = os.environ.get("SPARK_SUBMIT_OPTS", "").split()
    return " ".join(o for o in options if not o.startswith(("-XX:SharedArchiveFile=", "-Xlog:cds")))


def pytest_configure(config):
    for tier, meaning in TIERS.items():
        config.addinivalue_line("markers", f"{tier}: {meaning}")
    config.addinivalue_line(
        "markers",
        "last_in_primary_suite: runs last in the primary suite beside the line runs (make test, "
        "MMLSPARK_LINES_BESIDE=1), and only there",
    )


def tier_of(item: pytest.Item) -> str:
    """The one tier of a test: `system` or `lines` where marked, else `system` where it runs a
    whole job, `integration` where it uses a shared session, else `unit`. Two hand-marked tiers,
    or a hand-marked computed one, stop the run."""
    marked = [t for t in TIERS if item.get_closest_marker(t)]
    if len(marked) > 1 or set(marked) & {"unit", "integration"}:
        raise pytest.UsageError(
            f"{item.nodeid} is marked {marked}: mark at most one of system and lines (unit and "
            "integration follow from the fixtures a test uses)"
        )
    if marked:
        return marked[0]
    if WHOLE_JOBS & set(item.fixturenames):
        return "system"
    return "integration" if SHARED_SESSIONS & set(item.fixturenames) else "unit"


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    # The line runs collect only the files that spell the mark (scripts/spark_lines.py): a line
    # test marked some other way would never run on the other lines.
    line_files = {p.name for p in line_test_files()}
    unseen = [
        i.nodeid for i in items if i.get_closest_marker("lines") and i.path.name not in line_files
    ]
    if unseen:
        raise pytest.UsageError(
            f"{', '.join(unseen[:5])} marked lines in a file that does not spell "
            f"{LINES_MARK}, which the other lines' runs collect only (scripts/spark_lines.py)"
        )
    for item in items:
        item.add_marker(tier_of(item))
    beside = os.environ.get("MMLSPARK_LINES_BESIDE") == "1"
    if os.environ.get("MMLSPARK_LINES_EXCHANGE") and beside:
        # The primary suite beside the line runs (make test): the cross-line tests first, since
        # the other lines wait for what they leave in the exchange folder, and the check of every
        # line's results last, since it waits for the other lines.
        items.sort(
            key=lambda item: (
                item.get_closest_marker("last_in_primary_suite") is not None,
                item.path.name != "test_lines.py",
            )
        )
    else:
        # Without the line runs beside, no suite checks their results.
        last = [i for i in items if i.get_closest_marker("last_in_primary_suite")]
        if last:
            config.hook.pytest_deselected(items=last)
            items[:] = [i for i in items if i not in last]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    """A unit or integration test that starts a process fails, naming the tier it belongs to:
    the tiers stay true as tests change (fixtures may start the shared servers)."""
    if item.get_closest_marker("system") or item.get_closest_marker("lines"):
        yield
        return
    original = subprocess.Popen.__init__

    def refused(self, args, *rest, **kwargs):
        raise AssertionError(
            f"{item.nodeid} starts a process ({args!r:.200}): mark it pytest.mark.system"
        )

    subprocess.Popen.__init__ = refused  # type: ignore[method-assign]
    try:
        yield
    finally:
        subprocess.Popen.__init__ = original  # type: ignore[method-assign]


@pytest.fixture(scope="session")
def demo_run(spark, tmp_path_factory, request) -> tuple[dict, list[str], Path]:
    """The camera-trap demo, run once in local mode for every test that checks it or compares
    with it: its summary, its log lines and its output folder (read only). On the primary line it
    is the run of the camera-trap notebook (`demo_notebook`), with the jar, in a kernel of its
    own: the notebook's test checks that run, and the demo runs once, not twice."""
    from mmlspark.apps.camera_trap import job

    if mmlspark.spark_line() == mmlspark.spark_line(mmlspark.spark_version):
        _, summary, lines, out = request.getfixturevalue("demo_notebook")
        return summary, lines, out
    # The other lines' runs use only its classification part (tests/test_lines.py), and run the
    # detection stages in their own line tests.
    out = tmp_path_factory.mktemp("demo") / "demo"
    lines: list[str] = []
    summary = job.demo(spark, str(out), log=lines.append, detection=False)
    return summary, lines, out


@contextmanager
def environment(**variables: str) -> Iterator[None]:
    """os.environ with `variables` set inside the block (what a kernel started in it inherits)."""
    before = {name: os.environ.get(name) for name in variables}
    os.environ.update(variables)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def execute_notebook(notebook, **variables: str) -> None:
    """Runs every cell of `notebook` (nbformat, changed in place: the cells get their outputs) in a
    new python3 kernel in the checkout's root, which imports mmlspark from this checkout, with
    `variables` in its environment. Raises CellExecutionError, with the cell and its traceback,
    on a failure."""
    from nbclient import NotebookClient

    path = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    client = NotebookClient(notebook, timeout=600, kernel_name="python3",
                            resources={"metadata": {"path": str(ROOT)}})  # fmt: skip
    with environment(PYTHONPATH=path, **variables):
        client.execute()


@pytest.fixture(scope="session")
def demo_notebook(tmp_path_factory):
    """The camera-trap notebook as stored, run once with the jar (its session is the notebook's
    own, in the kernel's JVM): the executed notebook, and the summary, log lines and output
    folder of the demo it ran. Its temporary folders are made under the test's.

    With MMLSPARK_DEMO_SHARE (make test sets it for both of its chains) the run is made once per
    `make test`: the first suite to need it runs it and leaves it in that folder, read only; a
    suite that finds it there checks that run instead of running the notebook again."""
    import json

    import nbformat

    share = (
        Path(os.environ["MMLSPARK_DEMO_SHARE"]) if os.environ.get("MMLSPARK_DEMO_SHARE") else None
    )
    if share is not None and (share / "done.json").is_file():
        done = json.loads((share / "done.json").read_text())
        notebook = nbformat.read(share / "notebook.ipynb", as_version=4)
        return notebook, done["summary"], done["lines"], Path(done["work"])
    notebook = nbformat.read(DEMO_NOTEBOOK, as_version=4)
    stored = len(notebook.cells)
    report = "print('SUMMARY', json.dumps({'work': str(work), **summary}, default=str))"
    notebook.cells.append(nbformat.v4.new_code_cell(report))
    execute_notebook(notebook, TMPDIR=str(tmp_path_factory.mktemp("notebook")))
    printed = "".join(o.get("text", "") for o in notebook.cells.pop().outputs)
    assert len(notebook.cells) == stored
    summary = json.loads(printed.split("SUMMARY ", 1)[1])
    # The demo's log lines: what the cell that ran it printed.
    demo_cell = next(c for c in notebook.cells if "job.demo(" in c.source)
    said = "".join(o.get("text", "") for o in demo_cell.outputs if o.get("name") == "stdout")
    work = Path(summary.pop("work"))
    if share is not None:
        share.mkdir(parents=True, exist_ok=True)
        nbformat.write(notebook, share / "notebook.ipynb")
        done = {"summary": summary, "lines": said.splitlines(), "work": str(work)}
        partial = share / f"done.json.{os.getpid()}"
        partial.write_text(json.dumps(done, default=str))
        partial.replace(share / "done.json")  # atomic: the other suite sees all of it or nothing
    return notebook, summary, said.splitlines(), work


@pytest.fixture(scope="session")
def demo_model(spark, tmp_path_factory) -> Path:
    """The camera-trap classifier trained on the demo photos (`job.train` with its defaults),
    once for every test that classifies with a trained model and does not test training: the
    folder is read only (a test that changes a model changes a copy)."""
    from mmlspark.apps.camera_trap import job

    path = tmp_path_factory.mktemp("demo-model") / "model"
    data = job.DEMO_DATA
    job.train(spark, str(data / "images"), str(data / "featurizer.onnx"), str(path), log=print)
    return path


@pytest.fixture(scope="session")
def standalone_cluster(tmp_path_factory):
    """One Spark standalone cluster (a master and two one-core workers on loopback) for every
    test that submits to one: the camera-trap job's and the scaling benchmark's."""
    directory = tmp_path_factory.mktemp("cluster")
    with StandaloneCluster(
        directory, workers=2, memory="4g", java_options=jvm_options_of_tests()
    ) as c:
        c.start()
        yield c


@pytest.fixture(scope="session")
def spark():
    session = mmlspark.session(
        "local[2]",
        {
            "spark.ui.enabled": "false",
            "spark.sql.shuffle.partitions": "2",
        },  # the heap is mmlspark.session()'s default, as users get it
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def connect_server(tmp_path_factory):
    """One Spark Connect server with mmlspark loaded, shared by every test that needs one."""
    with ConnectServer(tmp_path_factory.mktemp("connect"), mmlspark.spark_conf()) as server:
        server.start()
        yield server


@contextmanager
def connect_mode() -> Iterator[None]:
    """pyspark (and mmlspark) treat the process as a Spark Connect client inside this block: they
    decide by the environment, so one process can hold a classic and a Connect session and use
    one at a time."""
    previous = os.environ.get("SPARK_CONNECT_MODE_ENABLED")
    os.environ["SPARK_CONNECT_MODE_ENABLED"] = "1"
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop("SPARK_CONNECT_MODE_ENABLED", None)
        else:
            os.environ["SPARK_CONNECT_MODE_ENABLED"] = previous


@pytest.fixture(scope="session")
def connect_spark(connect_server):
    """A Spark Connect session on the shared server, next to the classic `spark`."""
    from pyspark.sql.connect.session import SparkSession as ConnectSession

    with connect_mode():
        session = ConnectSession.builder.remote(connect_server.url).create()
    assert type(session).__module__ == "pyspark.sql.connect.session"
    yield session
    with connect_mode():
        session.stop()


@pytest.fixture(params=["classic", "connect"] if connect_ml_supported() else ["classic"])
def session(request, spark):
    """The classic session, then a Spark Connect one: a test taking `session` runs once on each,
    from one body (use it, never `spark`, inside such a test). On Spark 3.5, whose Connect server
    runs no ML stages, only the classic one."""
    if request.param == "classic":
        yield spark
        return
    remote = request.getfixturevalue("connect_spark")
    with connect_mode():
        yield remote


def generated_classes() -> list[type[MMLParams]]:
    """Every public wrapper class of every mmlspark area package."""
    found = {}
    for info in pkgutil.iter_modules(mmlspark.__path__):
        if info.name.startswith("_") or not info.ispkg or info.name in ("core", "jars"):
            continue
        module = importlib.import_module(f"mmlspark.{info.name}")
        for name in getattr(module, "__all__", []):
            cls = getattr(module, name)
            if isinstance(cls, type) and issubclass(cls, MMLParams):
                found[cls._java_class_name] = cls
    return [found[k] for k in sorted(found)]


def run_job(
    tmp_path: Path, script: str, argument: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Runs `script` in a Python process of its own (a session with its own settings, such as a
    local cluster) as `job.py ARGUMENT TESTS_DIR`, and checks that it succeeds."""
    path = tmp_path / "job.py"
    path.write_text(script)
    tests = Path(__file__).resolve().parent
    # The mmlspark this run imports: the source tree's, or an installed wheel's (line tests).
    package_root = Path(mmlspark.__file__).resolve().parent.parent
    result = subprocess.run(
        [sys.executable, str(path), argument, str(tests)],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(package_root), **(env or {})},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    return result


@pytest.fixture(scope="session")
def jarless_server(tmp_path_factory):
    """One Spark Connect server started without the mmlspark jar, for the whole run (a server
    start costs tens of seconds here)."""
    conf = {"spark.pyspark.python": sys.executable, "spark.sql.shuffle.partitions": "2"}
    with ConnectServer(tmp_path_factory.mktemp("jarless"), conf) as server:
        server.start()
        yield server


@pytest.fixture(scope="module")
def jarless_connect(jarless_server):
    """A session of its own on the jar-less Connect server, made the active Connect session (as
    it is for a user with one) for the module's tests."""
    from pyspark.sql.connect.session import SparkSession as ConnectSession

    with connect_mode():
        session = ConnectSession.builder.remote(jarless_server.url).create()
    previous = getattr(ConnectSession._active_session, "session", None)
    ConnectSession._active_session.session = session
    yield session
    ConnectSession._active_session.session = previous
    with connect_mode():
        session.stop()


@pytest.fixture
def python_backend():
    """The module's stages made on the Python backend (mmlspark.set_backend) for the test."""
    import mmlspark

    mmlspark.set_backend("python")
    try:
        yield
    finally:
        mmlspark.set_backend(None)
