"""Reading and writing files: the input loaders, the run directory's reader and writer, the one
committed-dataset primitive, durable file replacement and tables, the spend journals."""

from ray_knowsim.io.loaders import (
    GraphLoadError,
    LoadError,
    LoadWarning,
    load_graph_cache,
    load_init_cache,
    load_items,
    load_records,
)

__all__ = ["GraphLoadError", "LoadError", "LoadWarning", "load_graph_cache", "load_init_cache", "load_items", "load_records"]
