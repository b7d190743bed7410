"""Failure scenarios shared by the integration tests (embedded broker) and the
end-to-end tests (broker container)."""
