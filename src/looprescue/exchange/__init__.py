"""One rescued stream, sans-IO: upstream bytes in, client bytes and steps out."""
