"""The main window: the draft tree in the middle, panels in docks, menus, toolbars, presentation mode."""
