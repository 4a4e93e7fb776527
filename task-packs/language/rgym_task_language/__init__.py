"""rgym task pack: MLGym's language tasks (FineWeb language modelling, MNLI)."""
