"""``prepare`` functions of the tabular datasets: reproducible splits whose test
labels reach the grader only.

House prices are split exactly as MLGym's ``_generate_split.py`` does: 20 % test
with ``train_test_split(random_state=42)``, then 12.5 % of the rest for
validation with the same seed.  Titanic keeps Kaggle's test set (its labels,
``ground_truth.csv``, are private) and holds out 20 % of the training file as
a validation split (seed 42).

Each split is cached under a key made of the raw files' checksums, the build
version and the split parameters below, with a manifest of the prepared files
(see :func:`rgym_task_tabular.datasource.prepare_cached`): once prepared, a
split is reused without ``--data-dir`` or network.
"""

from __future__ import annotations

from pathlib import Path

from rgym_core import DatasetSpec, PreparedDataset
from rgym_task_tabular.datasource import prepare_cached

SEED = 42
HOUSE_PRICE_SPLIT = {"seed": SEED, "test_size": 0.2, "validation_size": 0.125}
TITANIC_SPLIT = {"seed": SEED, "validation_size": 0.2}


def _split_house_price(raw: Path, dest: Path) -> None:
    import pandas as pd
    from sklearn.model_selection import train_test_split

    split = HOUSE_PRICE_SPLIT
    df = pd.read_csv(raw / "ames_train.csv")
    features = df.drop(columns=["SalePrice"])
    labels = df[["Id", "SalePrice"]]
    x_rest, x_test, y_rest, y_test = train_test_split(
        features, labels, test_size=split["test_size"], random_state=split["seed"])
    x_train, x_val, y_train, y_val = train_test_split(
        x_rest, y_rest, test_size=split["validation_size"], random_state=split["seed"])
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
    out = prepare_cached(spec, cache_dir, data_dir, "mlgym-split-v2", _split_house_price,
                         HOUSE_PRICE_SPLIT)
    return PreparedDataset(id=spec.id, public=out / "public", private=out / "private")


def _split_titanic(raw: Path, dest: Path) -> None:
    import shutil

    import pandas as pd
    from sklearn.model_selection import train_test_split

    train = pd.read_csv(raw / "train.csv")
    fit, val = train_test_split(train, test_size=TITANIC_SPLIT["validation_size"],
                                random_state=TITANIC_SPLIT["seed"])
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
    out = prepare_cached(spec, cache_dir, data_dir, "split-v2", _split_titanic, TITANIC_SPLIT)
    return PreparedDataset(id=spec.id, public=out / "public", private=out / "private")
