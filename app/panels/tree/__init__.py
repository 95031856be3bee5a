"""The draft tree panel: layout (no Qt), the scene, keyboard moves, the minimap, the callout, words."""
