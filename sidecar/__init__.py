"""flow-sidecar: Apache Qpid producer flow control next to brokers that lack it."""
