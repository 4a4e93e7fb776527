"""Datasets of the cross-modal-retrieval pack.

* ``researchgym/cross-modal-retrieval``: the verified ResearchGym task directory.
* ``researchgym/cmr-coco-tiny``: a tiny COCO-style benchmark (``cpu`` profile): image and
  caption embeddings of a synthetic source model, five captions per image, generated from
  a fixed seed.  Matching image/caption pairs share a latent vector; the two modalities
  differ by a modality gap; *query shift* moves the queries of one modality into another
  domain (an offset and a rescaling, plus noise), as COCO-C's corruptions do to a real
  model's embeddings.  ``dev`` (public) and ``eval`` (private, never in the workspace)
  are different images.  The model (modality gap, shift directions) and ``dev`` come
  from the fixed seed; ``eval``'s embeddings and the order of each eval stream's queries
  and gallery come from the grader's secret
  (:func:`rgym_researchgym.generated.grader_secret`), so neither the public generator
  nor the layout of the arrays tells which caption belongs to which image.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rgym_researchgym.generated import GraderSecret, cached_generate
from rgym_researchgym.pack import prepare_dataset
from rgym_researchgym.prepare import TaskLayout

HERE = Path(__file__).parent
TASK_DIR = HERE / "tasks" / "cross-modal-retrieval"
LAYOUT = TaskLayout("cross-modal-retrieval", overlay=TASK_DIR / "overlay", version="1")

CONFIGS: dict[str, dict[str, Any]] = {
    "researchgym/cmr-coco-tiny": {"dim": 32, "captions": 5, "dev_images": 40, "eval_images": 240,
                                  "image_noise": 0.45, "text_noise": 0.9, "gap": 1.0,
                                  "shift": 6.0, "shift_scale": 0.6, "shift_noise": 0.8,
                                  "seed": 2025},
}
VERSION = "coco-tiny-v1"


def prepare_task(spec: Any, cache_dir: Path, data_dir: Path | None) -> Any:
    """``researchgym/cross-modal-retrieval``: the verified starter repository."""
    return prepare_dataset(LAYOUT, spec, cache_dir, data_dir)


def _split(rng: Any, config: dict[str, Any], n_images: int, gap: Any, shifts: dict[str, Any]) -> dict:
    import numpy as np

    dim, k = config["dim"], config["captions"]
    latent = rng.standard_normal((n_images, dim))
    images = latent + config["image_noise"] * rng.standard_normal((n_images, dim))
    texts = np.repeat(latent, k, axis=0) + config["text_noise"] * rng.standard_normal((n_images * k, dim)) + gap

    def shifted(x: Any, offset: Any) -> Any:
        return config["shift_scale"] * x + offset + config["shift_noise"] * rng.standard_normal(x.shape)

    arrays = {
        "qs_image_images": shifted(images, shifts["image"]), "qs_image_texts": texts,
        "qs_text_texts": shifted(texts, shifts["text"]), "qs_text_images": images,
    }
    annotations = {"img2txt": [list(range(i * k, (i + 1) * k)) for i in range(n_images)],
                   "txt2img": [i for i in range(n_images) for _ in range(k)]}
    return {"arrays": {n: a.astype("float32") for n, a in arrays.items()}, "annotations": annotations}


def _shuffled(rng: Any, part: dict[str, Any], k: int) -> dict[str, Any]:
    """Each stream's images and captions in an order of their own, and each stream's
    annotations (``{"qs_image": {"img2txt", "txt2img"}, "qs_text": ...}``) to match."""
    import numpy as np

    arrays, annotations = dict(part["arrays"]), {}
    n_images = len(arrays["qs_image_images"])
    for shift in ("qs_image", "qs_text"):
        img = rng.permutation(n_images)           # new row i holds image img[i]
        txt = rng.permutation(n_images * k)       # new row j holds caption txt[j]
        arrays[f"{shift}_images"] = arrays[f"{shift}_images"][img]
        arrays[f"{shift}_texts"] = arrays[f"{shift}_texts"][txt]
        image_row = np.empty(n_images, dtype=np.int64)
        image_row[img] = np.arange(n_images)      # original image -> its new row
        owner = image_row[txt // k]               # new caption row -> its image's new row
        img2txt: list[list[int]] = [[] for _ in range(n_images)]
        for row, image in enumerate(owner):
            img2txt[int(image)].append(row)
        annotations[shift] = {"img2txt": img2txt, "txt2img": [int(i) for i in owner]}
    return {"arrays": arrays, "annotations": annotations}


def build_coco_tiny(dataset_id: str, dest: Path, secret: GraderSecret) -> None:
    import numpy as np

    config = CONFIGS[dataset_id]
    rng = np.random.default_rng(config["seed"])
    dim = config["dim"]

    def direction() -> Any:
        v = rng.standard_normal(dim)
        return v / np.linalg.norm(v)

    gap = config["gap"] * direction()
    shifts = {"image": config["shift"] * direction(), "text": config["shift"] * direction()}
    private_rng = np.random.default_rng(secret.words("eval"))
    for split, folder in (("dev", dest / "public"), ("eval", dest / "private")):
        if split == "dev":
            part = _split(rng, config, config["dev_images"], gap, shifts)
        else:
            part = _shuffled(private_rng, _split(private_rng, config, config["eval_images"], gap, shifts),
                             config["captions"])
        for name, array in part["arrays"].items():
            np.save(folder / f"{split}_{name}.npy", array, allow_pickle=False)
        (folder / f"{split}_annotations.json").write_text(json.dumps(part["annotations"]) + "\n")
    (dest / "public" / "meta.json").write_text(json.dumps(
        {"benchmark": "coco-tiny", "config": config,
         "shifts": {"qs_image": "image queries shifted, caption gallery clean (i2t)",
                    "qs_text": "caption queries shifted, image gallery clean (t2i)"}}, indent=2) + "\n")


def prepare_coco_tiny(spec: Any, cache_dir: Path, data_dir: Path | None) -> Any:
    from rgym_core import PreparedDataset

    entry = cached_generate(cache_dir, spec.id, VERSION, CONFIGS[spec.id],
                            lambda dest, secret: build_coco_tiny(spec.id, dest, secret), secret=True)
    return PreparedDataset(id=spec.id, public=entry / "public", private=entry / "private")
