"""``prepare`` functions of the tabular datasets: reproducible splits whose test
labels reach the grader only.

House prices are split exactly as MLGym's ``_generate_split.py`` does: 20 % test
with ``train_test_split(random_state=42)``, then 12.5 % of the rest for
validation with the same seed.  Titanic keeps Kaggle's test set (its labels,
``ground_truth.csv``, are private) and holds out 20 % of the training file as
a validation split (seed 42).
"""

from __future__ import annotations

from pathlib import Path

from rgym_core.specs import DatasetSpec, PreparedDataset
from rgym_task_tabular.datasource import cached_build, raw_files

SEED = 42


def _split_house_price(source: Path, dest: Path) -> None:
    import pandas as pd
    from sklearn.model_selection import train_test_split

    df = pd.read_csv(source)
    features = df.drop(columns=["SalePrice"])
    labels = df[["Id", "SalePrice"]]
    x_rest, x_test, y_rest, y_test = train_test_split(features, labels, test_size=0.2,
                                                      random_state=SEED)
    x_train, x_val, y_train, y_val = train_test_split(x_rest, y_rest, test_size=0.125,
                                                      random_state=SEED)
    public, private = dest / "public", dest / "private"
    public.mkdir()
    private.mkdir()
    pd.concat([x_train, y_train["SalePrice"]], axis=1).to_csv(public / "train.csv", index=False)
    pd.concat([x_val, y_val["SalePrice"]], axis=1).to_csv(public / "validation.csv", index=False)
    x_test.to_csv(public / "test.csv", index=False)
    y_test.to_csv(private / "answer.csv", index=False)


def prepare_house_price(spec: DatasetSpec, cache_dir: Path,
                        data_dir: Path | None) -> PreparedDataset:
    """Kaggle's Ames ``train.csv`` split into train (1,022 rows), validation (146)
    and test (292, labels private in ``answer.csv``)."""
    raw = raw_files(spec, data_dir, cache_dir)
    out = cached_build(spec, cache_dir, "mlgym-split-v1",
                       lambda dest: _split_house_price(raw / "ames_train.csv", dest))
    return PreparedDataset(id=spec.id, public=out / "public", private=out / "private")


def _split_titanic(raw: Path, dest: Path) -> None:
    import shutil

    import pandas as pd
    from sklearn.model_selection import train_test_split

    train = pd.read_csv(raw / "train.csv")
    fit, val = train_test_split(train, test_size=0.2, random_state=SEED)
    public, private = dest / "public", dest / "private"
    public.mkdir()
    private.mkdir()
    fit.to_csv(public / "train.csv", index=False)
    val.to_csv(public / "validation.csv", index=False)
    shutil.copyfile(raw / "test.csv", public / "test.csv")
    shutil.copyfile(raw / "ground_truth.csv", private / "ground_truth.csv")


def prepare_titanic(spec: DatasetSpec, cache_dir: Path, data_dir: Path | None) -> PreparedDataset:
    """Kaggle's Titanic: train (712 rows), validation (179), test (418, labels
    private in ``ground_truth.csv``)."""
    raw = raw_files(spec, data_dir, cache_dir)
    out = cached_build(spec, cache_dir, "split-v1", lambda dest: _split_titanic(raw, dest))
    return PreparedDataset(id=spec.id, public=out / "public", private=out / "private")
