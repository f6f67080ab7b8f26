"""``vigil sweep``: a grid of replays run on Dask distributed, resumable, with one experiment report."""
