"""Contract suites: behaviour every implementation of a port must show (run by each adapter's tests)."""
