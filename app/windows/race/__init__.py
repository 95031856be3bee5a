"""The race: sessions of one prompt at their recorded pace."""
