"""The secondary windows: compare, race, fork, train a draft head."""
