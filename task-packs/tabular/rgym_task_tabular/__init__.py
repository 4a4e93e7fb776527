"""rgym-task-tabular: MLGym's tabular tasks (house prices, Titanic) as an rgym pack."""
