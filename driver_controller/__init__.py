"""sparkop: driver_controller."""
