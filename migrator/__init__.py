"""vam: a libcst codemod engine that applies versioned move tables to a source tree."""

__version__ = "0.1.0"
