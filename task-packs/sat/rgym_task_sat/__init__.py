"""rgym task pack: MLGym's 3-SAT heuristic task, on a generated, checksummed instance set."""
