"""The Compare view: sessions side by side."""
