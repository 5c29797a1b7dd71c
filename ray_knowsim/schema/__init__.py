"""Every data format of the project as pydantic models, with its validation, in one place: items,
IU graphs, knowledge states and signals (the spec's §1 formats), the models' structured outputs and
their JSON Schemas, chat requests and usage, prices, result rows, failure classes, decisions and
the metric catalogue. Formats only: no I/O (``ray_knowsim.io`` reads and writes them), no Ray."""
