"""sparkop: devcluster."""
