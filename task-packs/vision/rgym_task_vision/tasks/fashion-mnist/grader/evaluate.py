"""Hidden grader of mlgym/fashion-mnist: accuracy on the private test labels."""

from classification import grade

grade(n_classes=10)
