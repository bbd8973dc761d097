"""The parts of a Camtrap DP package that are not photo rows: the table schemas shipped with the
job, the user's deployments, taxa and metadata files, datapackage.json, and what still keeps a
package from being valid."""

from __future__ import annotations

import csv
import datetime
import functools
import json
import math
import re
from pathlib import Path
from typing import Any

import mmlspark
from mmlspark.apps.camera_trap.camtrap_dp.tables import Taxon
from mmlspark.apps.camera_trap.settings import JobError

VERSION = "1.0"
_BASE = f"https://raw.githubusercontent.com/tdwg/camtrap-dp/{VERSION}/"
#: The profile and table schemas a Camtrap DP 1.0 package names (by URL: validators, GBIF's IPT
#: among them, recognise the standard by them). Our own copies of the tables' rules are the
#: `*-schema.json` files beside this module, for checking a package offline (`local_descriptor`).
PROFILE = _BASE + "camtrap-dp-profile.json"
TABLES = ("deployments", "media", "observations")
PACKAGE_FILES = ("datapackage.json", *(f"{t}.csv" for t in TABLES))
#: The package properties the export computes from the data; metadata cannot set them.
COMPUTED = frozenset({"resources", "profile", "created", "spatial", "temporal", "taxonomic"})
_RANKS = {"kingdom", "phylum", "class", "order", "family", "genus", "species", "subspecies"}


@functools.cache
def schema(table: str) -> dict[str, Any]:
    """The Table Schema of `table` (deployments, media, observations) shipped with the job."""
    path = Path(__file__).with_name(f"{table}-schema.json")
    return json.loads(path.read_text(encoding="utf-8"))  # type: ignore[no-any-return]


def field_names(table: str) -> list[str]:
    return [f["name"] for f in schema(table)["fields"]]


def local_descriptor(package: str | Path) -> dict[str, Any]:
    """The datapackage.json of an exported package with its tables' schemas replaced by the
    job's own copies and the remote profile left out, so that a validator checks the data
    offline: ``frictionless.validate(local_descriptor(d), basepath=d)``."""
    descriptor = json.loads((Path(package) / "datapackage.json").read_text(encoding="utf-8"))
    descriptor.pop("profile", None)
    for resource in descriptor["resources"]:
        if resource.get("name") in TABLES:
            resource["schema"] = schema(resource["name"])
    return descriptor  # type: ignore[no-any-return]


def _read_csv(path: str, what: str) -> list[dict[str, str]]:
    try:
        with open(path, encoding="utf-8-sig", newline="") as f:
            rows = list(csv.DictReader(f))
            columns = list(rows[0].keys()) if rows else []
    except (OSError, UnicodeDecodeError, csv.Error) as e:
        raise JobError(f"cannot read the {what} CSV {path}: {e}") from None
    if not rows:
        raise JobError(f"the {what} CSV {path} has no rows")
    if None in columns:
        raise JobError(f"the {what} CSV {path} has a row with more values than its header")
    return [{k: (v or "").strip() for k, v in row.items()} for row in rows]


def read_deployments(path: str) -> dict[str, dict[str, str]]:
    """The deployments of a user's CSV by the folder their photos are in: the first folder under
    the results' --images (column `folder`, by default the deploymentID itself; the name of the
    --images folder for photos directly in it). Every other column must be a Camtrap DP
    deployments field (latitude, longitude, locationName, deploymentStart, ...)."""
    rows = _read_csv(path, "deployments")
    allowed = set(field_names("deployments")) | {"folder"}
    unknown = sorted(set(rows[0]) - allowed)
    if "deploymentID" not in rows[0] or unknown:
        raise JobError(
            f"the deployments CSV {path} must have a deploymentID column and otherwise only "
            f"Camtrap DP deployments fields and 'folder'; "
            + (f"unknown: {unknown}" if unknown else "deploymentID is missing")
        )
    found: dict[str, dict[str, str]] = {}
    ids: set[str] = set()
    for number, row in enumerate(rows, 2):
        deployment = row["deploymentID"]
        folder = row.pop("folder", "") or deployment
        if not deployment or deployment in ids or folder in found:
            raise JobError(
                f"the deployments CSV {path}, line {number}: a deploymentID and a folder must "
                f"be given once each (deploymentID {deployment!r}, folder {folder!r})"
            )
        for name, low, high in (("latitude", -90, 90), ("longitude", -180, 180)):
            if row.get(name):
                try:
                    value = float(row[name])
                except ValueError:
                    value = math.nan
                if not low <= value <= high:
                    raise JobError(
                        f"the deployments CSV {path}, line {number}: {name} {row[name]!r} is not "
                        f"a number from {low} to {high} (decimal degrees, WGS84)"
                    )
        ids.add(deployment)
        found[folder] = row
    return found


def read_taxa(path: str | None) -> dict[str, Taxon]:
    """The scientific names of the models' labels, from a CSV with columns label and
    scientificName (and optionally taxonID and taxonRank)."""
    if path is None:
        return {}
    rows = _read_csv(path, "taxa")
    if not {"label", "scientificName"} <= set(rows[0]):
        raise JobError(f"the taxa CSV {path} needs the columns label and scientificName")
    taxa = {}
    for number, row in enumerate(rows, 2):
        rank = row.get("taxonRank", "")
        if not row["label"] or not row["scientificName"] or (rank and rank not in _RANKS):
            raise JobError(
                f"the taxa CSV {path}, line {number}: needs a label and a scientificName, and a "
                f"taxonRank (if any) among {sorted(_RANKS)}"
            )
        taxa[row["label"]] = Taxon(row["scientificName"], row.get("taxonID", ""), rank)
    return taxa


def read_metadata(path: str | None) -> dict[str, Any]:
    """The package properties a user gives (title, contributors, project, licenses, ...)."""
    if path is None:
        return {}
    try:
        metadata = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise JobError(f"cannot read the metadata JSON {path}: {e}") from None
    if not isinstance(metadata, dict):
        raise JobError(f"the metadata JSON {path} must be an object of package properties")
    computed = sorted(COMPUTED & set(metadata))
    if computed:
        raise JobError(
            f"the metadata JSON {path} sets {computed}, which the export computes from the data"
        )
    return metadata


def _spatial(deployments: list[dict[str, Any]]) -> dict[str, Any] | None:
    points = [(float(d["longitude"]), float(d["latitude"])) for d in deployments]
    if not points:
        return None
    if len(set(points)) == 1:
        return {"type": "Point", "coordinates": list(points[0])}
    west, east = min(p[0] for p in points), max(p[0] for p in points)
    south, north = min(p[1] for p in points), max(p[1] for p in points)
    ring = [[west, south], [east, south], [east, north], [west, north], [west, south]]
    return {"type": "Polygon", "bbox": [west, south, east, north], "coordinates": [ring]}


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9._-]+", "-", text.lower()).strip("-") or "camera-trap-survey"


def descriptor(
    metadata: dict[str, Any],
    deployments: list[dict[str, Any]],
    taxa: list[Taxon],
    *,
    survey: str,
    capture_method: str,
) -> dict[str, Any]:
    """datapackage.json: the user's `metadata` over defaults named after the `survey` (the
    --images folder), with the resources, the spatial and temporal coverage of `deployments`
    (spatial only when every deployment has coordinates) and the `taxa` observed."""
    title = metadata.get("title") or f"Camera-trap survey {survey}"
    project = {
        "title": title,
        "captureMethod": [capture_method],
        # Machine observations name no individuals.
        "individualAnimals": False,
        "observationLevel": ["media", "event"],
        **metadata.get("project", {}),
    }
    package: dict[str, Any] = {
        "profile": PROFILE,
        "created": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "title": title,
        "contributors": [],
        "sources": [{"title": f"mmlspark {mmlspark.__version__} camera-trap export"}],
        **metadata,
        "name": _slug(metadata.get("name") or survey),
        "project": project,
        "resources": [
            {
                "name": table,
                "path": f"{table}.csv",
                "profile": "tabular-data-resource",
                "format": "csv",
                "mediatype": "text/csv",
                "encoding": "utf-8",
                "schema": f"{_BASE}{table}-table-schema.json",
            }
            for table in TABLES
        ],
    }
    located = [d for d in deployments if d.get("latitude") != "" and d.get("longitude") != ""]
    spatial = _spatial(located) if len(located) == len(deployments) else None
    if spatial is not None:
        package["spatial"] = spatial
    package["temporal"] = {
        "start": min(d["deploymentStart"][:10] for d in deployments),
        "end": max(d["deploymentEnd"][:10] for d in deployments),
    }
    package["taxonomic"] = [
        {
            "scientificName": t.scientific_name,
            **({"taxonID": t.taxon_id} if t.taxon_id else {}),
            **({"taxonRank": t.taxon_rank} if t.taxon_rank else {}),
        }
        for t in sorted(set(taxa), key=lambda t: t.scientific_name)
    ]
    return package


def missing(package: dict[str, Any], deployments: list[dict[str, Any]]) -> list[str]:
    """What the Camtrap DP profile requires that the package does not have yet, in words."""
    said = []
    unplaced = [d["deploymentID"] for d in deployments if not d["latitude"] or not d["longitude"]]
    if unplaced:
        said.append(
            f"latitude and longitude of {len(unplaced)} deployments (e.g. {unplaced[0]!r}): give "
            "them in a --deployments CSV"
        )
    contributors = package.get("contributors")
    if not contributors or not all(isinstance(c, dict) and c.get("title") for c in contributors):
        said.append("contributors, each with a title: give them in --metadata")
    if not package["project"].get("samplingDesign"):
        said.append("project.samplingDesign (e.g. opportunistic, targeted): give it in --metadata")
    return said
