"""What the window shows, without Qt: the session model, cycle sources (live or recorded), filters."""
