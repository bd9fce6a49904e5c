"""sparkop: apps_controller."""
