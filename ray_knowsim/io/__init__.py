"""Reading and writing files: the only place below the engine that touches the file system."""

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
