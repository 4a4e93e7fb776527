"""MS-COCO captions as users hold them, converted once for the captioning task.

Accepted raw layouts of ``<DATA_DIR>/coco-<year>/`` (``<year>`` 2014 or 2017):

* the archives COCO publishes, verified by SHA-256 and read without extracting:
  ``annotations_trainval<year>.zip``, ``train<year>.zip``, ``val<year>.zip``;
* their extracted form: ``annotations/captions_{train,val}<year>.json`` and the
  image folders ``train<year>/``, ``val<year>/``.  COCO publishes checksums for
  its archives only, so extracted files are checked against the annotations
  instead (every image listed must exist and decode; the JSON must have COCO's
  caption structure) and the conversion records ``"verified": "structure"``.

Each part (annotations, train images, val images) may come in either form.  The
conversion draws a seeded split (training images from the train part,
validation and test images from the val part), resizes every image once to
``image_size`` x ``image_size`` (PIL bilinear, as torchvision's ``Resize`` does on
PIL images) and writes::

    public/train.jsonl   {"image_id", "file_name", "captions": [...]}
    public/val.jsonl     same
    public/test.jsonl    {"image_id", "file_name"}   (no captions)
    public/images/{train,val,test}/<COCO file name>
    public/README.md
    private/test_references.jsonl   {"image_id", "captions": [...]}
"""

from __future__ import annotations

import json
import logging
import os
import random
import zipfile
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from rgym_core import DatasetError, DatasetSpec, check_data_dir
from rgym_task_vision import sources

log = logging.getLogger("rgym.datasets")

DEFAULT_SPLIT = {"train": 40000, "val": 2500, "test": 2500, "seed": 42, "image_size": 224}


def coco_params(spec: DatasetSpec) -> dict[str, Any]:
    """The split parameters of ``spec`` (they key the cache entry)."""
    split = {**DEFAULT_SPLIT, **spec.options.get("split", {})}
    return {"year": str(spec.options.get("year", "2017")), **split}


def extracted_fingerprint(spec: DatasetSpec, data_dir: Path | None, year: str) -> str | None:
    """SHA-256 over the extracted caption files, when those (not the annotations
    archive, whose checksum already keys the cache) are what the data folder holds.

    It keys the cache entry, so replacing an extracted COCO folder by another
    release never reuses a conversion of the old one."""
    import hashlib

    rels = [f"annotations/captions_train{year}.json", f"annotations/captions_val{year}.json"]
    for folder in sources.candidate_folders(spec, data_dir):
        if (folder / f"annotations_trainval{year}.zip").is_file():
            return None
        if all((folder / rel).is_file() for rel in rels):
            digest = hashlib.sha256()
            for rel in rels:
                digest.update(sources.sha256_of(folder / rel).encode())
            return digest.hexdigest()
    return None


# ----------------------------------------------------------------------------- raw parts


class Part:
    """One raw part (annotations, train or val images): an archive or its extracted form."""

    def __init__(self, spec: DatasetSpec, archive: str, extracted: list[str]) -> None:
        self.spec, self.archive, self.extracted = spec, archive, extracted
        self.zip_path: Path | None = None
        self.folder: Path | None = None  # the dataset folder holding the extracted form
        self.verified = ""

    def locate(self, folders: list[Path], data_dir: Path | None) -> None:
        for folder in folders:
            if (folder / self.archive).is_file():
                self.zip_path = folder / self.archive
                sources.verify_file(self.spec, self.zip_path, self.archive)
                self.verified = "sha256"
                return
            if all((folder / rel).exists() for rel in self.extracted):
                self.folder = folder
                self.verified = "structure"
                return
        expected = self.spec.checksums.get(self.archive, "?")
        where = ", ".join(str(f) for f in folders) or (
            f"{data_dir / sources.folder_name(self.spec)} (missing)" if data_dir
            else "no folder (no --data-dir given)")
        raise DatasetError(
            f"{self.archive}: missing data of dataset '{self.spec.id}': looked in {where} for "
            f"{self.archive} (expected sha256 {expected}) or its extracted form "
            f"({', '.join(self.extracted)}); {sources.where_to_get(self.spec, self.archive)}")

    def read(self, rel: str) -> bytes:
        """The bytes of ``rel`` (a path as inside the archive)."""
        if self.zip_path is not None:
            with zipfile.ZipFile(self.zip_path) as zf:
                try:
                    return zf.read(rel)
                except KeyError:
                    raise DatasetError(f"{self.zip_path}: has no member {rel}") from None
        assert self.folder is not None
        path = self.folder / rel
        if not path.is_file():
            raise DatasetError(f"{path}: missing")
        return path.read_bytes()

    def describe(self) -> str:
        return str(self.zip_path if self.zip_path is not None else self.folder)


def _load_captions(part: Part, rel: str) -> dict[int, dict[str, Any]]:
    """image id -> {"file_name", "width", "height", "captions"} from a captions JSON."""
    where = f"{part.describe()}/{rel}" if part.zip_path is None else f"{part.zip_path}!{rel}"
    try:
        data = json.loads(part.read(rel))
        images: dict[int, dict[str, Any]] = {
            int(im["id"]): {"file_name": str(im["file_name"]), "width": int(im["width"]),
                            "height": int(im["height"]), "captions": []}
            for im in data["images"]}
        for ann in data["annotations"]:
            entry = images.get(int(ann["image_id"]))
            if entry is None:
                raise ValueError(f"annotation {ann.get('id')} names unknown image {ann['image_id']}")
            entry["captions"].append(" ".join(str(ann["caption"]).split()))
    except DatasetError:
        raise
    except (ValueError, KeyError, TypeError) as exc:
        raise DatasetError(f"{where}: not a COCO captions file ({type(exc).__name__}: {exc}); "
                           f"expected 'images' (id, file_name, width, height) and "
                           f"'annotations' (image_id, caption)") from None
    for entry in images.values():
        name = str(entry["file_name"])
        if "/" in name or "\\" in name or name in ("", ".", ".."):
            raise DatasetError(f"{where}: image file name {name!r} is not a plain file name")
    return {k: v for k, v in images.items() if v["captions"]}


# ----------------------------------------------------------------------------- images

_ZIPS: dict[str, zipfile.ZipFile] = {}


def _convert(job: tuple[str, str, str, int, int, int]) -> str | None:
    """Decode, check and resize one image; returns an error message or None."""
    from io import BytesIO

    from PIL import Image, UnidentifiedImageError

    source, member, dest, size, width, height = job
    where = f"{source}!{member}" if source.endswith(".zip") else os.path.join(source, member)
    try:
        if source.endswith(".zip"):
            zf = _ZIPS.get(source) or _ZIPS.setdefault(source, zipfile.ZipFile(source))
            data = zf.read(member)
        else:
            with open(os.path.join(source, member), "rb") as fh:
                data = fh.read()
        with Image.open(BytesIO(data)) as image:
            if image.size != (width, height):
                return (f"{where}: is {image.size[0]}x{image.size[1]} but the annotations say "
                        f"{width}x{height}; the image or the annotations are from another release")
            rgb = image.convert("RGB").resize((size, size), Image.BILINEAR)
            rgb.save(dest, format="JPEG", quality=95)
    except KeyError:
        return f"{where}: missing from the archive"
    except FileNotFoundError:
        return f"{where}: missing (listed in the captions file)"
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError) as exc:
        return f"{where}: cannot be decoded as an image ({exc})"
    return None


def _convert_all(jobs: list[tuple[str, str, str, int, int, int]]) -> None:
    workers = min(len(jobs) // 200 + 1, os.cpu_count() or 1)
    if workers <= 1:
        results: Iterator[str | None] = map(_convert, jobs)
    else:
        pool = ProcessPoolExecutor(max_workers=workers)
        results = pool.map(_convert, jobs, chunksize=64)
    errors = [e for e in results if e]
    if workers > 1:
        pool.shutdown()
    if errors:
        more = f" (and {len(errors) - 3} more)" if len(errors) > 3 else ""
        raise DatasetError("; ".join(errors[:3]) + more)


# ----------------------------------------------------------------------------- build


def _split(params: dict[str, Any], train: dict[int, dict], val: dict[int, dict]
           ) -> dict[str, list[int]]:
    rng = random.Random(params["seed"])
    train_ids = sorted(train)
    rng.shuffle(train_ids)
    val_ids = sorted(val)
    rng.shuffle(val_ids)
    n_val, n_test = int(params["val"]), int(params["test"])
    if len(val_ids) < n_val + n_test:  # fewer images than asked: keep the proportion
        n_val = len(val_ids) * n_val // max(1, n_val + n_test)
        n_test = len(val_ids) - n_val
    out = {"train": sorted(train_ids[:int(params["train"])]),
           "val": sorted(val_ids[:n_val]), "test": sorted(val_ids[n_val:n_val + n_test])}
    for name, ids in out.items():
        if not ids:
            raise DatasetError(f"COCO split '{name}' is empty: the captions files list too few "
                               f"captioned images ({len(train)} train, {len(val)} val)")
    return out


def build_coco(spec: DatasetSpec, data_dir: Path | None, dest: Path,
               params: dict[str, Any]) -> None:
    """Locate, verify, split and convert COCO into ``dest`` (public/ and private/)."""
    check_data_dir(data_dir, "coco-2017/annotations_trainval2017.zip")
    year = params["year"]
    folders = sources.candidate_folders(spec, data_dir)
    ann_train, ann_val = f"annotations/captions_train{year}.json", f"annotations/captions_val{year}.json"
    annotations = Part(spec, f"annotations_trainval{year}.zip", [ann_train, ann_val])
    images = {split: Part(spec, f"{split}{year}.zip", [f"{split}{year}"]) for split in ("train", "val")}
    for part in (annotations, *images.values()):
        part.locate(folders, data_dir)
    captions = {"train": _load_captions(annotations, ann_train),
                "val": _load_captions(annotations, ann_val)}
    split = _split(params, captions["train"], captions["val"])
    public, private = dest / "public", dest / "private"
    size = int(params["image_size"])
    jobs = []
    rows: dict[str, list[dict[str, Any]]] = {}
    for name, ids in split.items():
        origin = "train" if name == "train" else "val"
        part, table = images[origin], captions[origin]
        folder = public / "images" / name
        folder.mkdir(parents=True)
        source = str(part.zip_path) if part.zip_path is not None else str(part.folder)
        rows[name] = []
        for image_id in ids:
            entry = table[image_id]
            jobs.append((source, f"{origin}{year}/{entry['file_name']}",
                         str(folder / entry["file_name"]), size, entry["width"], entry["height"]))
            rows[name].append({"image_id": image_id, "file_name": f"images/{name}/{entry['file_name']}",
                               "captions": entry["captions"]})
    _convert_all(jobs)
    private.mkdir()
    for name, table_rows in rows.items():
        with (public / f"{name}.jsonl").open("w") as fh:
            for row in table_rows:
                shown = row if name != "test" else {k: row[k] for k in ("image_id", "file_name")}
                fh.write(json.dumps(shown) + "\n")
    with (private / "test_references.jsonl").open("w") as fh:
        for row in rows["test"]:
            fh.write(json.dumps({"image_id": row["image_id"], "captions": row["captions"]}) + "\n")
    verified = {p.archive: p.verified for p in (annotations, *images.values())}
    if any(v != "sha256" for v in verified.values()):
        log.warning("dataset '%s': %s checked against the annotations only (COCO publishes "
                    "checksums for its zip archives; keep them in the data folder to verify by "
                    "SHA-256)", spec.id, ", ".join(k for k, v in verified.items() if v != "sha256"))
    (public / "README.md").write_text(_readme(year, split, size, verified))


def _readme(year: str, split: dict[str, list[int]], size: int, verified: dict[str, str]) -> str:
    lines = [f"# MS-COCO {year} captions", "",
             f"Converted by rgym from COCO {year} (train: train{year}; val and test: disjoint "
             f"seeded halves of val{year}). Every image was resized once to {size}x{size} RGB "
             f"(PIL bilinear) and saved as JPEG (quality 95).", "",
             "| file | content |", "| --- | --- |",
             f"| `train.jsonl` | {len(split['train'])} training images: one JSON object per line, "
             f"`image_id`, `file_name` (relative to this folder), `captions` (about 5 each) |",
             f"| `val.jsonl` | {len(split['val'])} validation images, same fields |",
             f"| `test.jsonl` | {len(split['test'])} test images: `image_id`, `file_name`; their "
             f"captions are hidden |",
             "| `images/{train,val,test}/` | the images |", "",
             "Submission: `submission.csv` with the columns `image_id,caption`, one row per test "
             "image.", "",
             "Raw files: " + ", ".join(f"{k} ({'SHA-256 verified' if v == 'sha256' else 'extracted; checked against the annotations'})"
                                       for k, v in sorted(verified.items())) + "."]
    return "\n".join(lines) + "\n"
