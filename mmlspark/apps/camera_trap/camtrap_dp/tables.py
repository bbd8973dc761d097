"""The rows of a Camtrap DP package's media.csv and observations.csv, built one event (a burst of
photos) at a time from the photo rows of a results folder: times in one timezone, machine
observations per photo (media level) and per event (event level)."""

from __future__ import annotations

import datetime
import hashlib
import mimetypes
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from mmlspark.apps.camera_trap.settings import JobError

#: What a label the models give means as a Camtrap DP observationType (any other label: animal).
_TYPES = {
    "empty": "blank",
    "blank": "blank",
    "person": "human",
    "people": "human",
    "human": "human",
    "vehicle": "vehicle",
}


def observation_type(label: str) -> str:
    return _TYPES.get(label.strip().lower(), "animal")


def short_id(*parts: str) -> str:
    """A stable 16-hex-digit identifier of `parts` (the same survey exports the same IDs)."""
    return hashlib.sha256("\0".join(parts).encode("utf-8")).hexdigest()[:16]


@dataclass(frozen=True)
class Clock:
    """Camtrap DP timestamps (ISO 8601 with an offset) in one timezone: `zone` is a fixed offset
    or an IANA zone, whose offset is the one in force at each moment."""

    zone: datetime.tzinfo

    @staticmethod
    def parse(name: str) -> Clock:
        """`UTC`/`Z`, an offset (`+02:00`, `-0530`) or an IANA name (`Europe/Berlin`)."""
        if name.strip().upper() in ("UTC", "Z", "GMT"):
            return Clock(datetime.timezone.utc)
        offset = re.fullmatch(r"([+-])(\d{2}):?(\d{2})", name.strip())
        if offset:
            sign = -1 if offset.group(1) == "-" else 1
            minutes = int(offset.group(2)) * 60 + int(offset.group(3))
            if minutes >= 24 * 60:
                raise JobError(f"--timezone {name}: an offset must be under 24 hours")
            return Clock(datetime.timezone(sign * datetime.timedelta(minutes=minutes)))
        try:
            return Clock(ZoneInfo(name))
        except (ZoneInfoNotFoundError, ValueError):
            raise JobError(
                f"--timezone {name!r} is neither UTC, an offset such as +02:00, nor a known IANA "
                "timezone such as Europe/Berlin"
            ) from None

    def camera(self, seconds: float) -> datetime.datetime:
        """The moment of a camera's wall-clock time (EXIF DateTimeOriginal, which the job reads
        into seconds as if it were UTC) taken in this timezone."""
        wall = datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc)
        return wall.replace(tzinfo=self.zone)

    def instant(self, seconds: float) -> datetime.datetime:
        """A moment given in seconds since the epoch (a file time), shown in this timezone."""
        return datetime.datetime.fromtimestamp(seconds, self.zone)


def iso(moment: datetime.datetime) -> str:
    text = moment.isoformat(timespec="seconds")
    return text[: -len("+00:00")] + "Z" if text.endswith("+00:00") else text


def media_type(name: str) -> str:
    guessed, _ = mimetypes.guess_type(name)
    if guessed and guessed.split("/")[0] in ("image", "video", "audio"):
        return guessed
    extension = name.rsplit(".", 1)[-1].lower() if "." in name else "unknown"
    return f"image/{extension}"  # the job reads only images


@dataclass(frozen=True)
class Taxon:
    scientific_name: str
    taxon_id: str = ""
    taxon_rank: str = ""


@dataclass
class Seen:
    """One machine observation of a photo, before it gets its identifiers and event."""

    kind: str
    label: str
    probability: float | None
    by: str
    bbox: list[float] | None = None
    count: int | None = None
    tags: list[str] = field(default_factory=list)


@dataclass
class Photo:
    """A photo of the results, placed: its media row's values and what was seen in it."""

    media_id: str
    deployment: str
    relative: str
    moment: datetime.datetime
    from_exif: bool
    seen: list[Seen]


def _tag(text: str) -> str:
    return text.replace("|", "/").strip()


def _bbox(values: Any) -> list[float]:
    """An [x, y, width, height] box in fractions of the image, kept inside it (a box's edge a
    rounding error outside the image would fail the package's range checks)."""
    x, y, w, h = (float(v) for v in values)
    x, y = min(max(x, 0.0), 1.0), min(max(y, 0.0), 1.0)
    w, h = min(max(w, 1e-6), 1.0 - x or 1e-6), min(max(h, 1e-6), 1.0 - y or 1e-6)
    return [round(x, 6), round(y, 6), round(w, 6), round(h, 6)]


@dataclass(frozen=True)
class Classifiers:
    """Who classified what: the detector's and the classifier's names as classifiedBy says them."""

    detector: str = ""
    classifier: str = ""


def seen_in(row: Any, kind: str, threshold: float, by: Classifiers) -> list[Seen]:
    """What the results say about one photo row: for classify results the photo's class; for
    detect and two-stage results each detection at or over `threshold` (its species where the
    crop was classified, else the detector's category), or one blank when there is none."""
    if kind == "classify":
        label = row["predicted_label"]
        return [Seen(observation_type(label), label, row["confidence"], by.classifier)]
    seen = []
    for d in row["detections"] or []:
        if d["conf"] < threshold:
            continue
        top = d["classifications"][0] if kind == "two-stage" and d["classifications"] else None
        if top is not None:
            tags = [f"detectionConfidence:{d['conf']:.4f}"]
            species = f"{by.classifier} on crops of {by.detector}"
            seen.append(
                Seen(
                    observation_type(top["label"]),
                    top["label"],
                    top["probability"],
                    species,
                    _bbox(d["bbox"]),
                    1,
                    tags,
                )
            )
        else:
            kind_of = observation_type(d["label"] or d["category"])
            seen.append(Seen(kind_of, d["label"], d["conf"], by.detector, _bbox(d["bbox"]), 1))
    if seen:
        return seen
    # The certainty that nothing is there: that the most confident detection is not.
    best = max((d["conf"] for d in row["detections"] or []), default=0.0)
    return [Seen("blank", "", 1.0 - best, by.detector)]


@dataclass(frozen=True)
class Settings:
    """What every row of one export shares."""

    capture_method: str
    files_public: bool
    classified_at: str
    taxa: dict[str, Taxon]


def _observation(settings: Settings, seen: Seen, **values: Any) -> dict[str, Any]:
    taxon = settings.taxa.get(seen.label) if seen.kind != "blank" else None
    tags = ([f"label:{_tag(seen.label)}"] if seen.label and seen.kind != "blank" else []) + [
        _tag(t) for t in seen.tags
    ]
    return {
        **values,
        "observationType": seen.kind,
        "scientificName": taxon.scientific_name if taxon else "",
        "count": "" if seen.count is None else seen.count,
        "classificationMethod": "machine",
        "classifiedBy": seen.by,
        "classificationTimestamp": settings.classified_at,
        "classificationProbability": ""
        if seen.probability is None
        else round(min(max(float(seen.probability), 0.0), 1.0), 6),
        "observationTags": "|".join(tags),
    }


def event_rows(
    settings: Settings, event_id: str, photos: list[Photo]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The media rows and observation rows of one event's photos (one deployment's): a
    media-level observation per thing seen in a photo, with the event's identifier, start and
    end; then the event-level observations: one per kind of thing seen (observationType and
    label) with the largest count any one photo has and the highest probability, or one blank
    when nothing was seen in any photo."""
    start = min(p.moment for p in photos)
    end = max(p.moment for p in photos)
    event = {
        "deploymentID": photos[0].deployment,
        "eventID": event_id,
        "eventStart": iso(start),
        "eventEnd": iso(end),
    }
    media, observations = [], []
    groups: dict[tuple[str, str], list[tuple[int, Seen]]] = {}
    for index, photo in enumerate(photos):
        name = photo.relative.rsplit("/", 1)[-1]
        media.append(
            {
                "mediaID": photo.media_id,
                "deploymentID": photo.deployment,
                "captureMethod": settings.capture_method,
                "timestamp": iso(photo.moment),
                "filePath": photo.relative,
                "filePublic": "true" if settings.files_public else "false",
                "fileName": name,
                "fileMediatype": media_type(name),
                "mediaComments": ""
                if photo.from_exif
                else "timestamp: the file's modification time (the photo has no EXIF "
                "DateTimeOriginal)",
            }
        )
        for number, seen in enumerate(photo.seen, 1):
            corners = ("bboxX", "bboxY", "bboxWidth", "bboxHeight")
            box = dict(zip(corners, seen.bbox, strict=True)) if seen.bbox else {}
            observations.append(
                _observation(
                    settings,
                    seen,
                    observationID=f"{photo.media_id}-{number}",
                    mediaID=photo.media_id,
                    observationLevel="media",
                    **event,
                    **box,
                )
            )
            if seen.kind != "blank":
                groups.setdefault((seen.kind, seen.label), []).append((index, seen))
    if not groups:
        blanks = [s for p in photos for s in p.seen]
        probabilities = [s.probability for s in blanks if s.probability is not None]
        least = min(probabilities) if probabilities else None
        groups[("blank", "")] = [(0, Seen("blank", "", least, blanks[0].by))]
    for number, ((kind, label), members) in enumerate(sorted(groups.items()), 1):
        counted = [s.count for _, s in members]
        per_photo: dict[int, int] = {}
        for index, s in members:
            per_photo[index] = per_photo.get(index, 0) + (s.count or 0)
        probabilities = [s.probability for _, s in members if s.probability is not None]
        summary = Seen(
            kind,
            label,
            max(probabilities) if probabilities else None,
            members[0][1].by,
            count=max(per_photo.values()) if kind != "blank" and None not in counted else None,
        )
        observations.append(
            _observation(
                settings,
                summary,
                observationID=f"{event_id}-e{number}",
                mediaID="",
                observationLevel="event",
                **event,
            )
        )
    return media, observations


def csv_row(fields: Iterable[str], values: dict[str, Any]) -> list[str]:
    """`values` in the order of a schema's `fields`, missing ones empty."""
    return [str(values.get(name, "")) for name in fields]
