"""Builds the mmlspark wheel: the Python package with the mmlspark jar inside.

Run through `make wheel`, which builds the jar first.
"""

import re
from pathlib import Path

from setuptools import find_packages, setup

here = Path(__file__).resolve().parent
version = re.search(r'__version__ = "([^"]+)"', (here / "mmlspark" / "_version.py").read_text())[1]
spark = re.search(r'spark_version = "([^"]+)"', (here / "mmlspark" / "_version.py").read_text())[1]
jars = list((here / "mmlspark" / "jars" / "repo").glob(f"mmlspark/mmlspark_2.13/{version}-*/*.jar"))
if len(jars) != 1:
    raise SystemExit(f"setup.py: expected one mmlspark {version} jar, found {jars}; run 'make jar'")

setup(
    name="mmlspark",
    version=version,
    description="Deep learning and image processing stages for Spark ML (ONNX Runtime, OpenCV)",
    long_description=(here / "README.md").read_text(),
    long_description_content_type="text/markdown",
    license="MIT",
    python_requires=">=3.10",
    packages=find_packages(include=["mmlspark", "mmlspark.*"]),
    package_data={
        "mmlspark": ["py.typed", "jars/packages.txt", "jars/repo/*/*/*/*", "resources/*.sh"],
        # The camera-trap demo's embedded photos and featurizer (see make_demo.py there).
        "mmlspark.apps.camera_trap": ["demo_data/featurizer.onnx", "demo_data/images/*/*.jpg"],
    },
    entry_points={
        "console_scripts": ["mmlspark-camera-trap = mmlspark.apps.camera_trap.__main__:main"]
    },
    install_requires=[f"pyspark=={spark}", "numpy>=1.22"],
    classifiers=[
        "Programming Language :: Python :: 3",
        "Programming Language :: Scala",
        "Topic :: Scientific/Engineering :: Artificial Intelligence",
    ],
)
