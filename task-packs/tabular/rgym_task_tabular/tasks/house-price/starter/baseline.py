"""Baseline for the house-price task: ridge regression on imputed, scaled
numeric features and one-hot encoded categorical features.

Trains on data/train.csv, reports validation r2/rmse, writes
validation_predictions.csv (check it with `python evaluate.py`) and
submission.csv (Id,SalePrice for every row of data/test.csv).
"""

import numpy as np
import pandas as pd
from sklearn.compose import ColumnTransformer
from sklearn.impute import SimpleImputer
from sklearn.linear_model import Ridge
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import OneHotEncoder, StandardScaler

TARGET = "SalePrice"

train = pd.read_csv("data/train.csv")
valid = pd.read_csv("data/validation.csv")
test = pd.read_csv("data/test.csv")

features = [c for c in train.columns if c not in ("Id", TARGET)]
numeric = train[features].select_dtypes(include="number").columns.tolist()
categorical = [c for c in features if c not in numeric]

preprocess = ColumnTransformer([
    ("numeric", make_pipeline(SimpleImputer(strategy="mean"), StandardScaler()), numeric),
    ("categorical", make_pipeline(
        SimpleImputer(strategy="constant", fill_value="missing"),
        OneHotEncoder(handle_unknown="ignore", sparse_output=False)), categorical),
])
model = make_pipeline(preprocess, Ridge(alpha=0.1))
model.fit(train[features], train[TARGET])


def report(name, frame):
    predicted = model.predict(frame[features])
    error = frame[TARGET].to_numpy() - predicted
    rmse = float(np.sqrt(np.mean(error ** 2)))
    r2 = 1 - float(np.sum(error ** 2)) / float(np.sum((frame[TARGET] - frame[TARGET].mean()) ** 2))
    print(f"{name}: rmse={rmse:.1f} r2={r2:.4f}")
    return predicted


report("train", train)
pd.DataFrame({"Id": valid["Id"], TARGET: report("validation", valid)}).to_csv(
    "validation_predictions.csv", index=False)
pd.DataFrame({"Id": test["Id"], TARGET: model.predict(test[features])}).to_csv(
    "submission.csv", index=False)
print(f"wrote submission.csv ({len(test)} rows) and validation_predictions.csv")
