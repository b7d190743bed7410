"""Hosting of deterministic shards: the contract, timers, and the I/O loop around them."""
