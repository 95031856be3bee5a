"""What a recorded session says, from its records alone: cycle summaries, spines, stop causes, metrics, time arithmetic, compare, race."""
