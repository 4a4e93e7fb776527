"""Score ``rgym_tta.retrieve`` on the development split in ``data/`` with the grader's
evaluation code: ``python rgym_check.py``.  The real score comes from the grader, on
embeddings held out from this workspace."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import rgym_tta
from rgym_itm_eval import itm_eval

DATA = Path("data")


def main() -> None:
    ann = json.loads((DATA / "dev_annotations.json").read_text())
    out = {}
    for shift, direction in (("qs_image", "i2t"), ("qs_text", "t2i")):
        images = np.load(DATA / f"dev_{shift}_images.npy")
        texts = np.load(DATA / f"dev_{shift}_texts.npy")
        if direction == "i2t":
            s_i2t = np.asarray(rgym_tta.retrieve(images, texts, "i2t"))
            res = itm_eval(s_i2t, s_i2t.T, ann["img2txt"], ann["txt2img"])
            out[shift] = {"i2t_r1": res["txt_r1"]}
        else:
            s_t2i = np.asarray(rgym_tta.retrieve(texts, images, "t2i"))
            res = itm_eval(s_t2i.T, s_t2i, ann["img2txt"], ann["txt2img"])
            out[shift] = {"t2i_r1": res["img_r1"]}
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
