"""Command line of the camera-trap job (also installed as ``mmlspark-camera-trap``).

    python -m mmlspark.apps.camera_trap demo --out demo-output
    python -m mmlspark.apps.camera_trap train --images photos/ --featurizer resnet50.onnx \\
        --feature-node pool --model-out model/
    python -m mmlspark.apps.camera_trap classify --images new-photos/ --model model/ --out run1/
    python -m mmlspark.apps.camera_trap evaluate --predictions run1/ --out run1/evaluation
    python -m mmlspark.apps.camera_trap detect --images photos/ --detector md_v5a.onnx --out det/
    python -m mmlspark.apps.camera_trap train --images photos/ --detector md_v5a.onnx \\
        --featurizer resnet50.onnx --model-out crops-model/
    python -m mmlspark.apps.camera_trap classify --images new-photos/ --detector md_v5a.onnx \\
        --model crops-model/ --out run2/
    python -m mmlspark.apps.camera_trap explain --images new-photos/ --detector md_v5a.onnx \\
        --model crops-model/ --out why2/
    python -m mmlspark.apps.camera_trap export --format camtrap-dp --predictions run2/ \\
        --deployments deployments.csv --taxa taxa.csv --metadata metadata.json --out run2-dp/
"""

from __future__ import annotations

import argparse
import inspect
import sys
from typing import Any

from mmlspark.apps.camera_trap import job, tracking


def run_options(p: argparse.ArgumentParser) -> None:
    """The options of the commands that write a results folder as they go (classify, detect)."""
    p.add_argument(
        "--overwrite",
        action="store_true",
        help="start over in --out: once the photos and models are checked, removes the files an "
        "earlier run of this job wrote there (as its run.json lists them), nothing else",
    )
    p.add_argument(
        "--retry-failures",
        action="store_true",
        help="score again the photos whose committed row is a failure",
    )
    p.add_argument(
        "--include-hidden",
        action="store_true",
        help="score files whose names (or whose folders' names) start with '.' or '_'; by "
        "default each is a failure row saying it was skipped",
    )
    p.add_argument(
        "--prune-missing",
        action="store_true",
        help="drop the results of photos no longer under --images (by default they are kept and "
        "counted as missing, so a moved folder or an unmounted card loses nothing)",
    )
    p.add_argument("--wait", action="store_true", help="wait for another run using --out to finish")
    p.add_argument(
        "--video-every-seconds",
        type=float,
        default=1.0,
        help="video files (.mp4, .avi, .mov, .mkv, ...): score one frame every this many seconds "
        "(default 1; MegaDetector's rule: every int(seconds x fps)-th frame from frame 0)",
    )
    p.add_argument(
        "--video-every-frames",
        type=int,
        default=0,
        help="video files: score every this many-th frame from frame 0 instead (e.g. 10 for "
        "3 of a 30 fps video's frames a second)",
    )
    p.add_argument(
        "--progress-json",
        metavar="FILE",
        help="append one JSON object per commit to FILE (photos done and to do, photos/s, "
        "seconds left), for a GUI to follow the run",
    )
    p.add_argument(
        "--commit-every",
        type=int,
        default=500,
        help="commit results at least every this many photos (default 500)",
    )
    p.add_argument(
        "--commit-seconds",
        type=float,
        default=60.0,
        help="and about every this many seconds (default 60; an estimate from the rate so "
        "far, not a bound)",
    )


def detector_options(p: argparse.ArgumentParser, action: str) -> None:
    """The options of the two-stage commands (train, classify and explain with a detector)."""
    p.add_argument(
        "--detector",
        help=f"ONNX detector (YOLO layout, e.g. MegaDetector): {action} the crops of its animal "
        "detections instead of whole photos",
    )
    p.add_argument(
        "--threshold",
        type=float,
        default=0.2,
        help="with --detector: the confidence a detection needs to be cropped (default 0.2)",
    )


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="mmlspark-camera-trap",
        description="Sort camera-trap photos by species or empty with transfer learning on Spark.",
    )
    p.add_argument("--master", help="Spark master URL (default: local[*], or spark-submit's)")
    p.add_argument("--remote", help="Spark Connect URL (sc://host:port) to run on instead")
    p.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="keep Spark's console: its stage bars and warnings (by default a local session "
        "shows the job's own lines and Spark's errors only)",
    )
    p.add_argument(
        "--backend",
        choices=["auto", "jvm", "python"],
        help="where the stages run: the mmlspark jar (jvm) or the Python workers (python); "
        "default auto: the jar where the session can load it",
    )
    sub = p.add_subparsers(dest="command", required=True)

    t = sub.add_parser("train", help="train a classifier on labelled photos")
    t.add_argument("--images", required=True, help="photos: any Spark-readable path")
    t.add_argument("--labels", help="COCO Camera Traps JSON (default: the photo's folder name)")
    t.add_argument("--featurizer", required=True, help="ONNX image model (local file)")
    t.add_argument("--feature-node", default="pool", help="node or tensor to cut the model at")
    t.add_argument("--image-size", type=int, default=96, help="side photos are resized to")
    t.add_argument("--model-out", required=True, help="directory to save the trained pipeline in")
    detector_options(t, "train on")
    tracking.tracking_options(t)

    c = sub.add_parser("classify", help="score photos with a trained model")
    c.add_argument("--images", required=True)
    c.add_argument(
        "--model",
        dest="model_dir",
        metavar="MODEL",
        required=True,
        help="directory written by train",
    )
    c.add_argument("--out", required=True, help="results directory (an interrupted run resumes)")
    run_options(c)
    c.add_argument(
        "--bursts",
        choices=["off", "cct", "time"],
        default="off",
        help="average each burst's probabilities: sequences from --cct (seq_id), or photos of "
        "one folder taken at most --burst-gap seconds apart (EXIF DateTimeOriginal, else the "
        "--cct datetime, else file time)",
    )
    c.add_argument("--cct", help="COCO Camera Traps JSON with the photos' seq_id")
    c.add_argument("--burst-gap", type=float, default=3.0, help="seconds between bursts")
    detector_options(c, "classify")

    t = sub.add_parser(
        "detect",
        help="find animals, people and vehicles with a YOLO-format ONNX detector (MegaDetector)",
    )
    t.add_argument("--images", required=True, help="photos: any Spark-readable path")
    t.add_argument("--detector", required=True, help="ONNX detector, YOLOv5 or YOLOv8 layout")
    t.add_argument("--out", required=True, help="results directory (an interrupted run resumes)")
    t.add_argument(
        "--threshold",
        type=float,
        default=0.005,
        help="write detections above this confidence (default 0.005, as MegaDetector; review "
        "tools choose their own display threshold, typically 0.2)",
    )
    t.add_argument(
        "--image-size", type=int, help="side photos are letterboxed to (default: the model's)"
    )
    t.add_argument(
        "--classes",
        help="comma-separated class names in the detector's order (default animal,person,vehicle)",
    )
    run_options(t)

    e = sub.add_parser("evaluate", help="metrics of classify results against ground truth")
    e.add_argument("--predictions", required=True, help="directory written by classify")
    e.add_argument("--labels", help="COCO Camera Traps JSON (default: the photo's folder name)")
    e.add_argument("--out", required=True)
    e.add_argument(
        "--threshold",
        type=float,
        help="for results with detections: the confidence a detection needs to count (default "
        "0.2 for detect, the run's --threshold for classify --detector)",
    )
    tracking.tracking_options(e)

    x = sub.add_parser(
        "export", help="write the results of classify or detect as a Camtrap DP data package"
    )
    x.add_argument(
        "--format",
        dest="package_format",
        choices=["camtrap-dp"],
        required=True,
        help="camtrap-dp: a Camtrap DP 1.0 package (datapackage.json, deployments.csv, "
        "media.csv, observations.csv), as GBIF publishes camera-trap data",
    )
    x.add_argument("--predictions", required=True, help="--out of a finished classify or detect")
    x.add_argument("--out", required=True, help="new or empty folder for the package")
    x.add_argument(
        "--deployments",
        help="CSV of the deployments: deploymentID, latitude, longitude and any other Camtrap DP "
        "deployments field, plus 'folder', the first folder under --images holding its photos "
        "(default: the deploymentID). Without it each first folder is a deployment with no "
        "coordinates, which a valid package needs",
    )
    x.add_argument(
        "--taxa",
        help="CSV with columns label and scientificName (optional taxonID, taxonRank): the "
        "scientific names of the models' labels; labels not in it have no scientificName (the "
        "label is kept in observationTags as label:NAME)",
    )
    x.add_argument(
        "--metadata",
        help="JSON object of package properties: title, contributors, project (samplingDesign, "
        "...), licenses, ...",
    )
    x.add_argument(
        "--timezone",
        default="UTC",
        help="the cameras' clock: UTC (default), an offset such as +02:00, or an IANA name such "
        "as Europe/Berlin",
    )
    x.add_argument(
        "--capture-method",
        choices=["activityDetection", "timeLapse"],
        default="activityDetection",
        help="how the cameras were triggered (default activityDetection)",
    )
    x.add_argument(
        "--threshold",
        type=float,
        help="the confidence a detection needs to be an observation (default: the run's "
        "--threshold for classify --detector, 0.2 for detect)",
    )
    x.add_argument(
        "--event-gap",
        type=float,
        default=3.0,
        help="for runs without --bursts: photos of one folder at most this many seconds apart "
        "are one event (default 3)",
    )
    x.add_argument(
        "--files-public",
        action="store_true",
        help="mark the photos as publicly viewable (filePublic; default false)",
    )
    x.add_argument(
        "--overwrite", action="store_true", help="replace an earlier export's files in --out"
    )

    h = sub.add_parser(
        "explain",
        help="heatmaps of where a trained model looked (ImageLIME or ImageSHAP), and a contact "
        "sheet",
    )
    h.add_argument("--images", required=True, help="photos: any Spark-readable path")
    h.add_argument(
        "--model",
        dest="model_dir",
        metavar="MODEL",
        required=True,
        help="directory written by train",
    )
    h.add_argument("--out", required=True, help="new or empty folder for the heatmaps")
    h.add_argument(
        "--photos",
        type=int,
        default=16,
        help="explain the N photos the model is least certain of (default 16; 0: every photo)",
    )
    h.add_argument(
        "--samples", type=int, default=500, help="perturbed copies scored per photo (default 500)"
    )
    h.add_argument(
        "--method",
        choices=["lime", "shap"],
        default="lime",
        help="ImageLIME (default; weighted ridge fit, r2 in explanations.json) or ImageSHAP "
        "(Kernel SHAP)",
    )
    h.add_argument(
        "--cell-size",
        type=float,
        help="superpixel size in pixels of the model's input image (default: the stage's)",
    )
    h.add_argument("--modifier", type=float, help="superpixel compactness (default: the stage's)")
    h.add_argument(
        "--overwrite", action="store_true", help="replace an earlier explain run's files in --out"
    )
    detector_options(h, "explain")

    d = sub.add_parser("demo", help="train, classify and evaluate on the embedded demo data")
    d.add_argument("--out", default="camera-trap-demo", help="directory for everything it writes")
    return p


def run(spark: Any, args: argparse.Namespace) -> Any:
    """Calls the job function named by the command with the options of the same names (each
    option's dest is the function's parameter name), plus the two built from several options."""
    values = dict(vars(args))
    if "commit_every" in values:
        values["settings"] = job.ClassifySettings(
            args.commit_every,
            args.commit_seconds,
            retry_failures=args.retry_failures,
            prune_missing=args.prune_missing,
            include_hidden=args.include_hidden,
            progress_json=args.progress_json,
        )
    if values.get("classes"):
        values["class_names"] = args.classes.split(",")
    function = getattr(job, args.command)
    wanted = inspect.signature(function).parameters
    return function(spark, **{name: values[name] for name in wanted if name in values})


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    tracker = None
    status = "FAILED"
    try:
        tracker = tracking.start(args)  # None unless asked; the server is checked here, first
        spark = job.spark_session(args.master, args.remote, args.backend, args.verbose)
        result = run(spark, args)
        if tracker is not None:
            tracker.log(spark, result)
        status = "FINISHED"
    except job.JobError as e:
        print(f"mmlspark-camera-trap {args.command}: {e}", file=sys.stderr)
        return 2
    except job.Interrupted as e:
        status = "KILLED"
        return 128 + e.signum
    finally:
        if tracker is not None:
            tracker.end(status)
    return 0


if __name__ == "__main__":
    sys.exit(main())
