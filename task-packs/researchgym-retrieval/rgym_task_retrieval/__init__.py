"""rgym pack: ResearchGym cross-modal-retrieval."""
