"""The main window's menu actions that are more than one call, each a part the window owns: export, what-if (fork and
compare), race, audit; and what they share (common)."""
