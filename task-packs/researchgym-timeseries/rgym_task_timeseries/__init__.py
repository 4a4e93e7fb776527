"""rgym pack: ResearchGym time-series-explanation."""
