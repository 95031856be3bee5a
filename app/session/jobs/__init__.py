"""Work the engine thread does besides decoding: forks, measurements, the race's recording."""
