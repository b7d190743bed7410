"""The daemon side of the wire: the daemon, its settings, services and ops endpoints."""
