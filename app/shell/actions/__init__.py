"""The window's menu actions that open other windows: audit, race, fork and compare."""
