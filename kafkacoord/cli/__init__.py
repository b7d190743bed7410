"""The ``kafkacoord`` command line: one module per command group; ``main`` assembles them."""
