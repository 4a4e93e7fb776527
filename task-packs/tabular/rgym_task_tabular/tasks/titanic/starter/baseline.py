"""Baseline for the Titanic task: logistic regression on class, sex, age, family
size, fare and port of embarkation.

Trains on data/train.csv, reports validation accuracy, writes
validation_predictions.csv (check it with `python evaluate.py`) and
submission.csv (PassengerId,Survived for every row of data/test.csv).
"""

import pandas as pd
from sklearn.compose import ColumnTransformer
from sklearn.impute import SimpleImputer
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import OneHotEncoder, StandardScaler

train = pd.read_csv("data/train.csv")
valid = pd.read_csv("data/validation.csv")
test = pd.read_csv("data/test.csv")

numeric = ["Age", "SibSp", "Parch", "Fare"]
categorical = ["Pclass", "Sex", "Embarked"]
preprocess = ColumnTransformer([
    ("numeric", make_pipeline(SimpleImputer(strategy="median"), StandardScaler()), numeric),
    ("categorical", make_pipeline(SimpleImputer(strategy="most_frequent"),
                                  OneHotEncoder(handle_unknown="ignore")), categorical),
])
model = make_pipeline(preprocess, LogisticRegression(max_iter=1000))
model.fit(train[numeric + categorical], train["Survived"])

val_pred = model.predict(valid[numeric + categorical])
print(f"validation accuracy: {(val_pred == valid['Survived']).mean():.4f}")
pd.DataFrame({"PassengerId": valid["PassengerId"], "Survived": val_pred}).to_csv(
    "validation_predictions.csv", index=False)
pd.DataFrame({"PassengerId": test["PassengerId"],
              "Survived": model.predict(test[numeric + categorical])}).to_csv(
    "submission.csv", index=False)
print(f"wrote submission.csv ({len(test)} rows) and validation_predictions.csv")
