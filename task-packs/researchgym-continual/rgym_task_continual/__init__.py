"""ResearchGym's continual-learning task (SD-LoRA, ICLR 2025) as an rgym task pack."""
