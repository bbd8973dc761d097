"""Builds the mmlspark wheel: the Python package with the mmlspark jar inside.

Run through `make wheel`, which builds the jar first.
"""

import re
from pathlib import Path

from setuptools import find_packages, setup

here = Path(__file__).resolve().parent
version = re.search(r'__version__ = "([^"]+)"', (here / "mmlspark" / "_version.py").read_text())[1]
spark = re.search(r'spark_version = "([^"]+)"', (here / "mmlspark" / "_version.py").read_text())[1]
jar = here / "mmlspark" / "jars" / f"mmlspark_2.13-{version}.jar"
if not jar.is_file():
    raise SystemExit(f"setup.py: {jar.relative_to(here)} is missing; build it with 'make jar'")

setup(
    name="mmlspark",
    version=version,
    description="Deep learning and image processing stages for Spark ML (ONNX Runtime, OpenCV)",
    long_description=(here / "README.md").read_text(),
    long_description_content_type="text/markdown",
    license="MIT",
    python_requires=">=3.10",
    packages=find_packages(include=["mmlspark", "mmlspark.*"]),
    package_data={"mmlspark": ["py.typed", "jars/*.jar", "jars/packages.txt"]},
    install_requires=[f"pyspark=={spark}", "numpy>=1.22"],
    classifiers=[
        "Programming Language :: Python :: 3",
        "Programming Language :: Scala",
        "Topic :: Scientific/Engineering :: Artificial Intelligence",
    ],
)
