"""sparkop: sparkop."""
