"""rageval: evaluate a RAG system on a golden set and gate pull requests on the result."""

__version__ = "0.1.0"
#: the config file a project folder holds (``rageval run examples/banhang`` reads its rageval.yml)
DEFAULT_CONFIG = "rageval.yml"
