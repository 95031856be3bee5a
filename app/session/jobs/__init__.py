"""Work the engine thread does besides decoding, over the state it holds (state): forks, measurements, the race's
recording."""
