"""sparkop: api."""
