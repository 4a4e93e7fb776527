"""Hidden grader of mlgym/cifar10: accuracy on the private test labels."""

from classification import grade

grade(n_classes=10)
