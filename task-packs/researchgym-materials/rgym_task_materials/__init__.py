"""ResearchGym's materials-tokenization task (MATTER, ACL 2025) as an rgym pack."""
