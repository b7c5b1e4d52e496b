"""rageval: evaluate a RAG system on a golden set and gate pull requests on the result."""

__version__ = "0.1.0"
