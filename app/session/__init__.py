"""The session behind the window: its lifecycle (controller), the engine thread and its jobs."""
