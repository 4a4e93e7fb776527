"""ResearchGym's improving-replay-buffers task (Prioritized Generative Replay, ICLR 2025) as an rgym task pack."""
